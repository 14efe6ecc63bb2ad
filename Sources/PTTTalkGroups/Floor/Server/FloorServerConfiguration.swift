/// A group's floor policy and the timers of its ``FloorServer``, named as in MCPTT's floor control server
/// (3GPP TS 24.380). The defaults and why are in "Floor control and liveness" in the DocC catalog.
public struct FloorServerConfiguration: Sendable, Hashable {
    /// The kind of call; see ``FloorCallType``. Default ``FloorCallType/basic``.
    public var callType: FloorCallType
    /// How many members may wait for the floor; 0 turns queueing off (a request while the floor is taken is denied
    /// with ``FloorDenyCause/anotherMemberHasPermission``); a request beyond it is denied with
    /// ``FloorDenyCause/queueFull``. Default 8.
    public var queueCapacity: Int
    /// The group's pre-emptive priority: a normal request whose priority is at least this and above the holder's
    /// revokes the holder and is granted at once. Nil (the default): priority alone never pre-empts; emergency and
    /// imminent-peril requests pre-empt a less urgent holder either way.
    public var preemptivePriority: UInt8?
    /// T1 (End of RTP media): the holder loses the floor after this long without a frame, counted from the grant
    /// until its first frame, then from its last. Default 4 s: long enough for a breath, a pause to think, and
    /// silence suppression between words; a vanished talker is found sooner by ``LivenessCheck``.
    public var endOfMedia: Duration
    /// T2 (Stop talking): the longest a holder may keep the floor, counted from the grant; then it is revoked
    /// (``FloorRevokeCause/mediaBurstTooLong``) with a grace of ``stopTalkingGrace``. Nil: no limit. Default 30 s.
    public var stopTalking: Duration?
    /// How long before T2 expires the holder is warned (``FloorServer/Message/stopTalkingWarning(remaining:)``); nil,
    /// or not shorter than ``stopTalking``: no warning. Default 5 s.
    public var stopTalkingWarning: Duration?
    /// T3 (Stop talking grace): after the T2 revoke, the holder's audio is still forwarded this long (the end of a
    /// word, its release on its way) before the floor moves on. Default 1 s.
    public var stopTalkingGrace: Duration
    /// How long a member whose floor was revoked for talking too long is denied the floor
    /// (``FloorDenyCause/retryAfter(_:)``), so the members waiting or about to ask get their turn. Default 3 s.
    public var retryAfter: Duration
    /// T4 (Inactivity): the application is told (``FloorServer/Notice/inactive``) each time the floor has been
    /// idle this long, to end a call nobody uses. Nil: never. Default 30 s.
    public var inactivity: Duration?
    /// T7 (Floor Idle): the interval at which Floor Idle is sent again to every member while the floor stays idle,
    /// up to ``floorIdleRepeats`` times.
    public var floorIdleInterval: Duration
    /// C7: how many times Floor Idle is repeated. Default 0: members hear floor messages on a reliable stream and
    /// a member that joins or comes back is told the floor's state at once.
    public var floorIdleRepeats: Int
    /// T8 (Floor Revoke): the interval at which a member whose floor was revoked, and whose audio is being refused,
    /// is sent Floor Revoke again while it keeps sending, up to ``floorRevokeRepeats`` times; then the application
    /// is told (``FloorServer/Notice/revokeIgnored(_:)``). Default 1 s.
    public var floorRevokeInterval: Duration
    /// How many times Floor Revoke is repeated to a member that keeps sending. Default 3.
    public var floorRevokeRepeats: Int
    /// T20 (Floor Granted): the interval at which Floor Granted is sent again to a holder that has sent no audio
    /// yet, up to ``floorGrantedRepeats`` times (C20). Default 1 s.
    public var floorGrantedInterval: Duration
    /// C20: how many times Floor Granted is repeated. Default 3: a grant sent on a connection that a phone's wake
    /// replaced is heard on the next.
    public var floorGrantedRepeats: Int

    /// A configuration; every value has the default its property describes.
    public init(
        callType: FloorCallType = .basic, queueCapacity: Int = 8, preemptivePriority: UInt8? = nil,
        endOfMedia: Duration = .seconds(4), stopTalking: Duration? = .seconds(30),
        stopTalkingWarning: Duration? = .seconds(5), stopTalkingGrace: Duration = .seconds(1),
        retryAfter: Duration = .seconds(3), inactivity: Duration? = .seconds(30),
        floorIdleInterval: Duration = .seconds(1), floorIdleRepeats: Int = 0,
        floorRevokeInterval: Duration = .seconds(1), floorRevokeRepeats: Int = 3,
        floorGrantedInterval: Duration = .seconds(1), floorGrantedRepeats: Int = 3
    ) {
        self.callType = callType
        self.queueCapacity = queueCapacity
        self.preemptivePriority = preemptivePriority
        self.endOfMedia = endOfMedia
        self.stopTalking = stopTalking
        self.stopTalkingWarning = stopTalkingWarning
        self.stopTalkingGrace = stopTalkingGrace
        self.retryAfter = retryAfter
        self.inactivity = inactivity
        self.floorIdleInterval = floorIdleInterval
        self.floorIdleRepeats = floorIdleRepeats
        self.floorRevokeInterval = floorRevokeInterval
        self.floorRevokeRepeats = floorRevokeRepeats
        self.floorGrantedInterval = floorGrantedInterval
        self.floorGrantedRepeats = floorGrantedRepeats
    }

    /// The configuration under which a ``FloorServer`` decides as a ``RelayChannel`` with `control` does today: its
    /// policy (``FloorControl/Policy/refuse`` is a queue of 0), T1 = ``FloorControl/idleRelease``, no talk-time limit,
    /// no pre-emption by priority, and no repeated or periodic messages.
    public init(_ control: FloorControl) {
        let capacity: Int
        switch control.policy {
        case .refuse: capacity = 0
        case .queue(let limit): capacity = max(0, limit)
        }
        self.init(
            queueCapacity: capacity, endOfMedia: max(.milliseconds(1), control.idleRelease), stopTalking: nil,
            stopTalkingWarning: nil, inactivity: nil, floorRevokeRepeats: 0, floorGrantedRepeats: 0)
    }
}

/// The configuration's times in nanoseconds of the monotonic clock the server is driven with.
struct FloorServerTimes: Sendable {
    let endOfMedia: UInt64
    let stopTalking: UInt64?
    /// When the warning goes, counted from the grant (nil: no warning).
    let warningAfterGrant: UInt64?
    let stopTalkingGrace: UInt64
    let retryAfter: UInt64
    let inactivity: UInt64?
    let floorIdleInterval: UInt64
    let floorRevokeInterval: UInt64
    let floorGrantedInterval: UInt64

    init(_ configuration: FloorServerConfiguration) {
        // Timers of zero would fire in the step that armed them, again and again: at least 1 ms each; and at most
        // a century, so no conversion overflows.
        func nanoseconds(_ duration: Duration) -> UInt64 { min(duration, .seconds(3_153_600_000)).nanoseconds }
        func positive(_ duration: Duration) -> UInt64 { max(1_000_000, nanoseconds(duration)) }
        endOfMedia = positive(configuration.endOfMedia)
        stopTalking = configuration.stopTalking.map(positive)
        let warning = configuration.stopTalkingWarning.map(nanoseconds) ?? 0
        if let stopTalking, warning > 0, warning < stopTalking {
            warningAfterGrant = stopTalking - warning
        } else {
            warningAfterGrant = nil
        }
        stopTalkingGrace = positive(configuration.stopTalkingGrace)
        retryAfter = nanoseconds(configuration.retryAfter)
        inactivity = configuration.inactivity.map(positive)
        floorIdleInterval = positive(configuration.floorIdleInterval)
        floorRevokeInterval = positive(configuration.floorRevokeInterval)
        floorGrantedInterval = positive(configuration.floorGrantedInterval)
    }
}
