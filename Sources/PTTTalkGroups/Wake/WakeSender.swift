import PTTTransport
import TransportCore

/// The app's push gateway, as a `TalkGroupRelay` sees it: when a burst starts — at the floor request, before the
/// grant, so the pushes overlap the talker's grant tone — the relay hands it the group's members to wake, once per
/// burst. The gateway sends each member a push carrying the request's `WakeRequest.ticket` (on iOS an APNs
/// `pushtotalk` push; on Android a high-priority FCM message; see the article *Waking members for a burst*).
///
/// The relay calls `wake(_:)` off its event loops, never delaying the floor or the audio, with at most
/// `WakeHookPolicy.concurrency` calls at once, each bounded by `WakeHookPolicy.timeout`; requests beyond
/// `WakeHookPolicy.queueLimit` waiting are dropped. Failures (a thrown error), timeouts and drops are counted in
/// `TalkGroupRelay.wakeStatistics`. A gateway that learns a token is dead tells the relay with
/// `TalkGroupRelay.reportUndeliverable(_:)`.
public protocol WakeSender: Sendable {
    /// Sends the pushes for one burst. Throw to have the call counted as failed; a call that outlasts the timeout
    /// is counted as timed out and cancelled (its result is then ignored).
    func wake(_ request: WakeRequest) async throws
}

/// One burst's wake-up, handed to a `WakeSender`.
public struct WakeRequest: Hashable, Sendable {
    /// The group.
    public var group: String
    /// The burst that started.
    public var burst: UInt64
    /// Who talks.
    public var talker: MemberIdentity
    /// The relay holding the burst: the one that granted it (in a fleet, the group's home, whose burst buffer holds
    /// every burst it grants), where the woken phones go.
    public var relay: RelayIdentity
    /// The members to wake: those of the group not connected now (suspended or unreachable) that registered a
    /// wake address, in identity order. In a fleet, every such member of the group on any relay, once (see the
    /// article *Groups across a fleet*).
    public var members: [WakeTarget]
    /// Whether this is a late addition to a burst already handed over: in a fleet, the store's list of the group's
    /// members came after `FleetConfiguration.memberReadDeadline`, and `members` are those it names that the burst's
    /// first request did not (a member is never named twice in a burst). `"late": true` in `--wake-exec`'s JSON.
    public var isLateAddition: Bool

    /// A request (`isLateAddition`: a burst's second request, with the members its first did not name).
    public init(
        group: String, burst: UInt64, talker: MemberIdentity, relay: RelayIdentity, members: [WakeTarget],
        isLateAddition: Bool = false
    ) {
        self.group = group
        self.burst = burst
        self.talker = talker
        self.relay = relay
        self.members = members
        self.isLateAddition = isLateAddition
    }

    /// What each push carries (the same for every member): the group, the burst and the relay.
    public var ticket: WakeTicket { WakeTicket(group: group, burst: burst, relay: relay) }
}

/// One member to wake.
public struct WakeTarget: Hashable, Sendable {
    /// Who.
    public var identity: MemberIdentity
    /// Where its push goes.
    public var address: WakeAddress
    /// In a fleet, the name of the relay the member was last on when that is not the relay holding the burst (from
    /// the fleet's store); nil for a member of the relay holding the burst, and without a fleet. For the gateway's
    /// logs: the ticket sends the phone to the relay holding the burst.
    public var lastRelay: String?

    /// A target (`lastRelay`: the other relay of the fleet it was last on).
    public init(identity: MemberIdentity, address: WakeAddress, lastRelay: String? = nil) {
        self.identity = identity
        self.address = address
        self.lastRelay = lastRelay
    }
}

/// How a `TalkGroupRelay` runs its `WakeSender`.
public struct WakeHookPolicy: Hashable, Sendable {
    /// How long one `wake(_:)` call may take before it is counted as timed out and cancelled (default 5 s).
    public var timeout: Duration
    /// How many requests may wait for a free call; a burst beyond that is dropped and counted (default 64).
    public var queueLimit: Int
    /// How many calls may run at once (default 4). A call that timed out but ignores its cancellation keeps its
    /// place until it returns, so a hook that hangs for good ends up dropping every burst (counted) instead of
    /// piling up calls.
    public var concurrency: Int

    /// A policy; every parameter has the default described on its property.
    public init(timeout: Duration = .seconds(5), queueLimit: Int = 64, concurrency: Int = 4) {
        self.timeout = timeout
        self.queueLimit = queueLimit
        self.concurrency = concurrency
    }
}

/// What a relay's wake hook did (`TalkGroupRelay.wakeStatistics`).
public struct WakeStatistics: Hashable, Sendable {
    /// Bursts handed to the `WakeSender`.
    public var requests: UInt64 = 0
    /// Members in those requests.
    public var members: UInt64 = 0
    /// Calls that threw.
    public var failures: UInt64 = 0
    /// Calls that outlasted the timeout.
    public var timeouts: UInt64 = 0
    /// Bursts dropped because the queue was full (the hook is slower than the bursts come).
    public var dropped: UInt64 = 0
    /// Bursts with nobody to wake (no call made). In a fleet whose store answered late, a burst whose first request
    /// named nobody counts here, and its late addition, when it names someone, in `requests`.
    public var nobodyToWake: UInt64 = 0
    /// For each request handed over (oldest first, at most 10,000 kept): the floor request's arrival (or the grant,
    /// for a member granted from the queue) to the `wake(_:)` call. A late addition (`WakeRequest/isLateAddition`)
    /// waited for a slow store, not for the relay: it is counted in `requests`, not sampled here.
    public var handOffLatencies: [Duration] = []

    /// All zero.
    public init() {}
}
