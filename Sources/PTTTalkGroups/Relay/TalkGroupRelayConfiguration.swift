import PTTTransport
import TransportCore

extension TalkGroupRelay {
    /// How a `TalkGroupRelay` runs its groups.
    public struct Configuration: Sendable {
        /// Who this relay is, for wake tickets: the name and port phones connect to (and its QUIC-LB server ID).
        public var identity: RelayIdentity
        /// Each group's floor: MCPTT floor control (``FloorServerConfiguration``'s defaults: a line of 8 ordered by
        /// urgency and priority, emergency and imminent-peril pre-emption, talk time 30 s with a warning 5 s before,
        /// and an idle release (T1) after 4 s without audio, which a breath or silence suppression between words
        /// does not reach; a vanished talker is found sooner by the liveness check).
        public var floor: FloorControl
        /// Each group's liveness check (default `LivenessCheck()`; nil: none).
        public var liveness: LivenessCheck?
        /// Each group's burst buffer (default 30 s, 384 KiB, kept 15 s after the burst).
        public var burstBuffer: BurstBufferPolicy
        /// How long a member that is not connected stays a member, from its last change (default 24 hours).
        public var membershipLifetime: Duration
        /// The most members one group may have (default 10,000); a join beyond is refused (`noResources`).
        public var maximumMembersPerGroup: Int
        /// The most groups the relay runs (default 10,000); a join to a new group beyond is refused.
        public var maximumGroups: Int
        /// How the wake hook runs (timeout, queue, concurrency).
        public var wakeHook: WakeHookPolicy
        /// How long a forwarded live frame may wait to be sent (default 100 ms).
        public var frameLifetime: Duration
        /// The fleet this relay's groups span (nil, the default: a relay on its own). With a fleet, each group's
        /// floor is granted only by its home relay (see the article *Groups across a fleet*).
        public var fleet: FleetConfiguration?
        /// The trunks to the fleet's other relays (nil, the default: none; needs `fleet`). With trunks, a member on a
        /// relay that is not its group's home has its floor requests decided by the home, and each talker's audio
        /// reaches the group's members on every relay, once per group per peer relay.
        public var trunk: TrunkConfiguration?

        /// A configuration for the relay `identity`; every other parameter has the default described on its
        /// property.
        public init(identity: RelayIdentity) {
            self.identity = identity
            floor = FloorControl(server: FloorServerConfiguration())
            liveness = LivenessCheck()
            burstBuffer = BurstBufferPolicy()
            membershipLifetime = .seconds(24 * 3600)
            maximumMembersPerGroup = 10_000
            maximumGroups = 10_000
            wakeHook = WakeHookPolicy()
            frameLifetime = .milliseconds(100)
            fleet = nil
            trunk = nil
        }
    }

    /// Checks a join's credential: true admits `request.user` (the app's server issued the credential to that user),
    /// false refuses the join with `unauthenticated`. Called off the event loops, once per join (a reconnect joins
    /// again); it may ask another service, but the phone's first audio waits for it.
    public typealias Authenticator = @Sendable (_ request: TalkGroupMessage.JoinRequest) async -> Bool

    /// Checks a join's credential as `Authenticator` does, but at once — a table lookup or a signature check, never
    /// a call to another service. With one, the relay acts on a woken phone's 0-RTT join and catch-up on the event
    /// loop, in the turn its first flight arrived (see `TalkGroupRelay.init(server:configuration:immediateAuthenticator:wakeSender:events:)`).
    /// Called on the relay's event loops for those joins: it must return at once and must not block.
    public typealias ImmediateAuthenticator = @Sendable (_ request: TalkGroupMessage.JoinRequest) -> Bool
}

/// What a `TalkGroupRelay` did, one value per event, for logs and monitoring (`serve --talk-groups --events`).
public enum TalkGroupEvent: Sendable {
    /// `user` joined `group` (in 0-RTT when `early`); `replaced` when it replaced the user's earlier connection.
    case joined(user: MemberIdentity, group: String, early: Bool, replaced: Bool)
    /// `user` left `group` (it asked, or its membership expired).
    case left(user: MemberIdentity, group: String, expired: Bool)
    /// `user`'s presence changed.
    case presence(user: MemberIdentity, group: String, presence: MemberPresence)
    /// The floor of `group` changed: a grant (starting `burst`), a release (ending it), a place in line, a denial.
    case floor(group: String, event: String, user: MemberIdentity, burst: UInt64?, reason: FloorReleaseReason?)
    /// The wake hook was handed `members` members for `burst`.
    case wake(group: String, burst: UInt64, members: Int)
    /// `user` started catching up on `burst` from `from`; the burst had reached `next`.
    case catchUp(user: MemberIdentity, group: String, burst: UInt64, from: UInt32, next: UInt32)
    /// A request was refused with `error` (`request` "fleet": the fleet's store is unusable as configured).
    case refused(user: MemberIdentity?, request: String, error: TransportError)
    /// The live relays of the fleet changed (as the store answered this relay's heartbeat).
    case fleet(relays: [String])
    /// This relay's role for `group` changed (`FleetElection.Role`'s description, `was` before); with
    /// `floorReleased` the group's floor was revoked (its home moved, or this relay stopped granting).
    case home(group: String, role: String, was: String, floorReleased: Bool)
    /// A trunk to the relay `peer` changed: `state` is `up` (`reason` says dialed or accepted), `down`, `refused` (a
    /// connection at the trunk listener that did not prove the fleet secret; `peer` is the name it gave or its
    /// address) or `dial-failed`, with the reason.
    case trunk(peer: String, state: String, reason: String?)
}
