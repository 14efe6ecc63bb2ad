/// What a relay's trunks did since it started (``TalkGroupRelay/trunkStatistics``).
public struct TrunkStatistics: Sendable, Equatable {
    /// Trunks that came up (dialed or accepted, after the proof).
    public var up: UInt64 = 0
    /// Trunks that went down after coming up.
    public var down: UInt64 = 0
    /// Connections refused at the trunk listener: no proof in time, a wrong one, or what is not a trunk message.
    public var refused: UInt64 = 0
    /// Dials that failed (unreachable, certificate, refused by the peer).
    public var dialFailures: UInt64 = 0
    /// Audio datagrams sent to peer relays (one per group per following peer per frame).
    public var datagramsSent: UInt64 = 0
    /// Audio datagrams received from peer relays and fanned out here.
    public var datagramsReceived: UInt64 = 0
    /// Datagrams received on a trunk that were dropped: not a trunk datagram, a group not followed here, a frame not
    /// of the group's current burst, or on a connection not proven yet.
    public var datagramsDropped: UInt64 = 0
    /// Floor requests this relay forwarded to a group's home on another relay.
    public var floorRequestsForwarded: UInt64 = 0
    /// Floor requests this relay decided as home for members of other relays.
    public var floorRequestsDecided: UInt64 = 0
}
