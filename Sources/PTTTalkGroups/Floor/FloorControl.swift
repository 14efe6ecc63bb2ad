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

    /// The whole MCPTT floor server policy (priorities, pre-emption, talk-time limit and warning, queue positions,
    /// reject causes; see ``FloorServerConfiguration``). Nil: the floor decides as `policy` and `idleRelease` say
    /// (``FloorServerConfiguration/init(_:)``); set, `policy` and `idleRelease` are not used.
    public var server: FloorServerConfiguration?

    /// Floor control with `policy` (default `.refuse`) and `idleRelease` (default 1 s).
    public init(policy: Policy = .refuse, idleRelease: Duration = .seconds(1)) {
        self.policy = policy
        self.idleRelease = idleRelease
    }

    /// MCPTT floor control as `server` configures it (TS 24.380's floor control server): a priority per request,
    /// pre-emption, a talk-time limit with a warning, queue positions and reject causes.
    public init(server: FloorServerConfiguration) {
        self.init(policy: .queue(limit: server.queueCapacity), idleRelease: server.endOfMedia)
        self.server = server
    }

    /// The configuration the channel's ``FloorServer`` runs with.
    var configuration: FloorServerConfiguration { server ?? FloorServerConfiguration(self) }
}

/// The answer to `RelayChannel.requestFloor(for:)`.
public enum FloorRequestResult: Sendable, Hashable {
    /// The member holds the floor now (also when it held it already): its audio is forwarded.
    case granted
    /// Another member holds the floor; this one waits at `position` (1: next) and is granted when its turn comes
    /// (a `FloorEvent.granted` tells). Asking again while waiting returns the current position.
    case queued(position: Int)
    /// The request is refused for `cause` (MCPTT's reject cause: #1 another member has permission and this one may not
    /// wait, #4 retry after, #5 receive only, #6 no resources, #7 queue full); `holder` holds the floor (nil: nobody).
    case denied(holder: TransportConnection.ID?, cause: FloorDenyCause)
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
    /// A more urgent request (emergency, imminent peril) or, by the group's policy, a higher priority took the floor
    /// (MCPTT's Floor Revoke #4).
    case preempted
    /// It talked for the group's longest talk time (``FloorServerConfiguration/stopTalking``, MCPTT's T2; Floor
    /// Revoke #2).
    case talkTimeExceeded
}

extension FloorReleaseReason: CustomStringConvertible {
    /// What happened, in words: "released by the talker", "pre-empted by a more urgent request", ...
    public var description: String {
        switch self {
        case .released: "released by the talker"
        case .revoked: "revoked by the application"
        case .idle: "idle: no audio for the idle release time"
        case .left: "the talker left the group"
        case .closed: "the talker's connection closed"
        case .unresponsive: "the talker stopped answering"
        case .preempted: "pre-empted by a more urgent or higher-priority request"
        case .talkTimeExceeded: "the talk time ran out"
        }
    }
}

/// What happened to a channel's floor, in order, on `RelayChannel.floorEvents`: the relay application forwards
/// these to members as it likes (a control message, a beep).
public enum FloorEvent: Sendable, Hashable {
    /// `member` holds the floor now (on its request, or as the first member waiting once the floor freed).
    case granted(TransportConnection.ID)
    /// `member` asked and waits at `position` (1: next); sent again each time its position changes.
    case queued(TransportConnection.ID, position: Int)
    /// `member` asked and was refused for `cause`; `holder` held the floor (nil: nobody did).
    case denied(TransportConnection.ID, holder: TransportConnection.ID?, cause: FloorDenyCause)
    /// `member`'s floor is being taken back for `cause` (MCPTT's Floor Revoke): its audio is refused from now on
    /// (for a talk time that ran out, after the group's grace). A `released` follows.
    case revoked(TransportConnection.ID, cause: FloorRevokeCause)
    /// `member`, holding the floor, must stop within `remaining` (its talk time runs out; MCPTT's T2).
    case talkTimeWarning(TransportConnection.ID, remaining: Duration)
    /// `member` no longer holds the floor, for `reason`. The floor is free unless a `.granted` follows.
    case released(TransportConnection.ID, reason: FloorReleaseReason)
}

/// A `FloorEvent` with the identities of the members it names and when it happened, on
/// `RelayChannel.floorUpdates`: what a relay tells its members ("alice talks", "bob waits at 2").
public struct FloorUpdate: Sendable, Hashable {
    /// What happened.
    public let event: FloorEvent
    /// Who the event is about (granted, queued, denied, revoked, warned, released), by the identity it joined as
    /// (its connection's name when it joined without one).
    public let member: MemberIdentity
    /// Who held the floor, for a denial or a place in line (nil otherwise, or when nobody did).
    public let holder: MemberIdentity?
    /// When it happened: nanoseconds of the system's monotonic clock (CLOCK_MONOTONIC).
    public let at: UInt64

    /// An update: `event` about `member`, with the floor's `holder`, at `at`.
    public init(event: FloorEvent, member: MemberIdentity, holder: MemberIdentity?, at: UInt64) {
        self.event = event
        self.member = member
        self.holder = holder
        self.at = at
    }
}
