import PTTTransport

/// Where a talk-group member is, as its relay sees it. A member stays a member while it is away — suspended by its
/// phone's operating system, or out of reach — until it leaves or its membership expires
/// (`TalkGroupRelay.Configuration.membershipLifetime`).
public enum MemberPresence: String, Hashable, Sendable {
    /// It has a connection to the relay: it hears the group live.
    case connected
    /// Its connection ended cleanly (the app suspended, application code 0): a push wakes it.
    case suspended
    /// Its connection vanished (idle timeout, liveness check, reset), or the push gateway reported its wake address
    /// dead (`TalkGroupRelay.reportUndeliverable(_:)`, which drops the address).
    case unreachable
}

/// One member of a group, as `TalkGroupRelay.members(of:)` lists it.
public struct MemberStatus: Hashable, Sendable {
    /// Who it is.
    public var identity: MemberIdentity
    /// The group it is in.
    public var group: String
    /// Where it is.
    public var presence: MemberPresence
    /// How long ago its presence last changed (its join, its connection's end, a report of its wake address).
    public var unchangedFor: Duration
    /// Where a push wakes it (nil: it registered none, or the gateway reported it dead).
    public var wakeAddress: WakeAddress?
}
