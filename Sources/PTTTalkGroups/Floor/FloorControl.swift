import PTTTransport

/// Floor control for a `RelayChannel`: at most one member — the talker, who holds the floor — has its audio
/// forwarded; frames from everyone else are dropped at the relay and counted (`RelayChannel.framesRefused`).
///
/// Pass one to `RelayChannel(server:frameLifetime:statistics:floor:liveness:burstBuffer:)`. The application decides who asks
/// for the floor and when (typically on a control message from the phone: "talk", "done"), calls
/// `RelayChannel.requestFloor(for:)` and `releaseFloor(for:)`, and tells members what happened from
/// `RelayChannel.floorEvents`. The channel frees the floor by itself when the talker leaves the channel, its
/// connection closes, or it sends no audio for `idleRelease`; with `.queue`, the first member waiting is then
/// granted. See "Floor control" in the DocC catalog for how this maps to MCPTT floor control (3GPP TS 24.380).
public struct FloorControl: Sendable, Hashable {
    /// What a request does while another member holds the floor.
    public enum Policy: Sendable, Hashable {
        /// The request is denied (`FloorRequestResult.denied`); the member asks again later.
        case refuse
        /// The member waits in line, first come first served, up to `limit` members; a request beyond that is denied
        /// (a `limit` of 0 or less denies every request, like `.refuse`). The first member waiting is granted the
        /// floor as soon as it frees.
        case queue(limit: Int)
    }

    /// What a request does while the floor is taken.
    public var policy: Policy
    /// How long the talker may send no audio before the floor is taken back (`FloorReleaseReason.idle`): counted from
    /// the grant until its first frame, then from its last frame. It ends a burst whose end-of-burst was lost, or a
    /// talker that vanished. At least 1 ms.
    public var idleRelease: Duration

    /// Floor control with `policy` (default `.refuse`) and `idleRelease` (default 1 s).
    public init(policy: Policy = .refuse, idleRelease: Duration = .seconds(1)) {
        self.policy = policy
        self.idleRelease = idleRelease
    }
}

/// The answer to `RelayChannel.requestFloor(for:)`.
public enum FloorRequestResult: Sendable, Hashable {
    /// The member holds the floor now (also when it held it already): its audio is forwarded.
    case granted
    /// Another member holds the floor; this one waits at `position` (1: next) and is granted when its turn comes
    /// (a `FloorEvent.granted` tells). Asking again while waiting returns the current position.
    case queued(position: Int)
    /// Another member (`holder`) holds the floor and this one may not wait (policy `.refuse`, or the queue is full).
    case denied(holder: TransportConnection.ID)
}

/// Why the talker lost the floor.
public enum FloorReleaseReason: String, Sendable, Hashable {
    /// It released the floor (`RelayChannel.releaseFloor(for:)`).
    case released
    /// The application took the floor away (`RelayChannel.revokeFloor()`).
    case revoked
    /// It sent no audio for `FloorControl.idleRelease`.
    case idle
    /// It left the channel (`leave`, or a `join` that moved it to another channel).
    case left
    /// Its connection closed.
    case closed
    /// It stopped answering: the channel's liveness check closed its connection (see `LivenessCheck`).
    case unresponsive
}

/// What happened to a channel's floor, in order, on `RelayChannel.floorEvents`: the relay application forwards
/// these to members as it likes (a control message, a beep).
public enum FloorEvent: Sendable, Hashable {
    /// `member` holds the floor now (on its request, or as the first member waiting once the floor freed).
    case granted(TransportConnection.ID)
    /// `member` asked and waits at `position` (1: next).
    case queued(TransportConnection.ID, position: Int)
    /// `member` asked while `holder` held the floor and may not wait.
    case denied(TransportConnection.ID, holder: TransportConnection.ID)
    /// `member` no longer holds the floor, for `reason`. The floor is free unless a `.granted` follows.
    case released(TransportConnection.ID, reason: FloorReleaseReason)
}
