/// The floor of one group call as MCPTT's floor control server (3GPP TS 24.380) models it, as a state machine with
/// no I/O, no lock and no clock: inputs (a member joins or leaves, a Floor Request or Release, a frame of audio, a
/// revoke, the time) go in with the time now, in monotonic nanoseconds; each returns a ``Step`` with the
/// ``Message``s to send and to whom, ``Notice``s for the application, and when to call ``expire(now:)`` next.
///
/// Members are keyed by `Member`, any identity the application chooses (a user ID it authenticated, a
/// connection). The server keeps the floor's state ("G: Floor Idle", "G: Floor Taken", "G: pending Floor Revoke"),
/// each member's ("U: permitted", ...), the queue of requests (most urgent, then highest priority, then first come)
/// and its timers (T1 End of RTP media, T2 Stop talking, T3 Stop talking grace, T4 Inactivity, T7 Floor Idle,
/// T8 Floor Revoke, T20 Floor Granted). Frames go through ``receiveMedia(from:now:)``: only the holder's are
/// forwarded. "Floor control and liveness" in the DocC catalog maps every transition to TS 24.380.
///
/// ```swift
/// var floor = FloorServer<String>(now: clock())
/// _ = floor.join("alice", now: clock())
/// _ = floor.join("dispatch", now: clock())
/// let step = floor.request("alice", FloorRequest(priority: 10), now: clock())
/// // step.messages: Floor Granted to alice, Floor Taken (by alice) to dispatch; arm a timer at step.nextDeadline
/// ```
public struct FloorServer<Member: Hashable & Sendable>: Sendable {
    /// The group's policy and timers.
    public let configuration: FloorServerConfiguration
    /// The floor's state now.
    public internal(set) var state: State = .floorIdle
    /// The kind of call now: ``FloorServerConfiguration/callType`` until ``setCallType(_:)`` changes it.
    public internal(set) var callType: FloorCallType
    /// Whether new talkers may be granted or queued (``setResources(available:now:)``).
    public internal(set) var resourcesAvailable = true
    /// Frames refused so far: sent by members that did not hold the floor.
    public internal(set) var framesRefused: UInt64 = 0

    let times: FloorServerTimes
    /// The members, by identity.
    var participants: [Member: Participant] = [:]
    /// The members in the order they joined: the order in which messages to all of them are sent.
    var order: [Member] = []
    /// The holder and its grant; nil when the floor is idle.
    var grant: Grant?
    /// The members waiting for the floor.
    var waiting = FloorQueue<Member>()
    /// The running timers but T1, which follows the holder's last frame (``deadline(of:)``).
    var timers: [Timer: UInt64] = [:]
    /// Floor Idle messages repeated since the floor fell idle (C7).
    var idleRepeats = 0

    /// What the server keeps of a member.
    struct Participant: Sendable {
        var role: FloorRole
        /// Set while it is in "U: pending Floor Revoke".
        var revocation: Revocation?
        /// Its requests are denied (#4) until then, unless urgent.
        var retryAfterUntil: UInt64 = 0
    }

    /// A revoked member that has not released yet.
    struct Revocation: Sendable {
        let cause: FloorRevokeCause
        /// Floor Revoke repeated so far (T8).
        var repeats = 0
        /// Its last refused frame.
        var lastRefusedFrame: UInt64?
    }

    /// The holder's grant.
    struct Grant: Sendable {
        let member: Member
        /// Its request, urgency raised to the call's.
        let request: FloorRequest
        let grantedAt: UInt64
        /// Its last frame, or the grant until its first frame: T1 runs from here.
        var lastMedia: UInt64
        /// Whether a frame of it arrived: T20 stops.
        var heard = false
        /// Floor Granted repeated so far (C20).
        var grantedRepeats = 0
    }

    /// A server for a call with `configuration`, in "G: Floor Idle" (TS 24.380's MCPTT call initialization) at
    /// `now`: T4 runs.
    public init(configuration: FloorServerConfiguration = FloorServerConfiguration(), now: UInt64) {
        self.configuration = configuration
        callType = configuration.callType
        times = FloorServerTimes(configuration)
        if let inactivity = times.inactivity { arm(.inactivity, now: now, after: inactivity) }
    }

    // MARK: What the server knows

    /// The member holding the floor; nil when it is idle.
    public var holder: Member? { grant?.member }
    /// The holder's request (its urgency raised to the call's); nil when the floor is idle.
    public var holderRequest: FloorRequest? { grant?.request }
    /// The members waiting, next first.
    public var queue: [Member] { waiting.members }
    /// The members, in the order they joined.
    public var members: [Member] { order }

    /// Whether `member` is in the call.
    public func isMember(_ member: Member) -> Bool { participants[member] != nil }

    /// `member`'s role; nil when it is not in the call.
    public func role(of member: Member) -> FloorRole? { participants[member]?.role }

    /// Where `member` waits (1: next); nil when it does not.
    public func queuePosition(of member: Member) -> Int? { waiting.position(of: member) }

    /// `member`'s state towards the floor; nil when it is not in the call.
    public func participantState(of member: Member) -> ParticipantState? {
        guard let participant = participants[member] else { return nil }
        if let grant, grant.member == member { return state == .pendingFloorRevoke ? .pendingFloorRevoke : .permitted }
        if participant.revocation != nil { return .pendingFloorRevoke }
        return grant == nil ? .notPermittedAndFloorIdle : .notPermittedAndFloorTaken
    }

    /// When `timer` falls due (monotonic nanoseconds); nil when it is not running.
    public func deadline(of timer: Timer) -> UInt64? {
        if case .endOfMedia = timer { return grant.map { later($0.lastMedia, times.endOfMedia) } }
        return timers[timer]
    }

    /// When the earliest running timer falls due: call ``expire(now:)`` then. Nil when none runs.
    public var nextDeadline: UInt64? {
        let endOfMedia = deadline(of: .endOfMedia)
        guard let earliest = timers.values.min() else { return endOfMedia }
        return min(earliest, endOfMedia ?? .max)
    }

    // MARK: Inputs

    /// `member` joins the call at `now` as `role` (or, already in it, takes `role`), and is told the floor's
    /// state: Floor Taken with the holder's identity, or Floor Idle; its own Floor Granted when it holds the floor
    /// (a phone back on a new connection), and its queue position when it waits.
    public mutating func join(_ member: Member, role: FloorRole = .transmitAndReceive, now: UInt64) -> Step {
        var step = Step()
        participantJoins(member, role: role, now: now, into: &step)
        return finished(step)
    }

    /// `member` leaves the call at `now`: it loses the floor (``ReleaseReason/left``) or its place in the queue, and
    /// gets no message from then on.
    public mutating func leave(_ member: Member, now: UInt64) -> Step {
        var step = Step()
        participantLeaves(member, now: now, into: &step)
        return finished(step)
    }

    /// Floor Request from `member` at `now`: granted when the floor is idle, granted at once when it pre-empts the
    /// holder, otherwise queued or denied; see ``FloorDenyCause``.
    public mutating func request(_ member: Member, _ request: FloorRequest = FloorRequest(), now: UInt64) -> Step {
        var step = Step()
        floorRequest(member, request, now: now, into: &step)
        return finished(step)
    }

    /// Floor Release from `member` at `now`: the holder gives up the floor (the first member waiting is granted
    /// it), a waiting member its place, a revoked member its pending revoke.
    public mutating func release(_ member: Member, now: UInt64) -> Step {
        var step = Step()
        floorRelease(member, now: now, into: &step)
        return finished(step)
    }

    /// Floor Queue Position Request from `member` at `now`: it is told where it waits, or else the floor's state.
    public mutating func queuePositionRequest(_ member: Member, now: UInt64) -> Step {
        var step = Step()
        queuePositionRequest(member, now: now, into: &step)
        return finished(step)
    }

    /// The application takes the floor from its holder at `now` (Floor Revoke with `cause`): the holder's audio is
    /// refused from this step on, and the first member waiting is granted the floor.
    public mutating func revoke(cause: FloorRevokeCause = .other, now: UInt64) -> Step {
        var step = Step()
        applicationRevokes(cause: cause, now: now, into: &step)
        return finished(step)
    }

    /// The application says at `now` whether the group can take a new talker. While it cannot, requests are denied
    /// with ``FloorDenyCause/noResources`` (#6), and the members waiting are told so and leave the queue; the holder
    /// keeps talking.
    public mutating func setResources(available: Bool, now: UInt64) -> Step {
        var step = Step()
        resourcesChange(available: available, into: &step)
        return finished(step)
    }

    /// The call becomes `type` (an emergency call, say): requests from now on are at least as urgent as the call.
    public mutating func setCallType(_ type: FloorCallType) {
        callType = type
    }

    /// A frame of audio from `member` at `now`: true when it is to be forwarded (it holds the floor, or is in T3's
    /// grace); otherwise it is refused and counted in ``framesRefused``. Restarts T1 and stops T20.
    public mutating func receiveMedia(from member: Member, now: UInt64) -> Bool {
        if var grant, grant.member == member {
            grant.lastMedia = max(grant.lastMedia, now)
            if !grant.heard {
                grant.heard = true
                timers[.floorGranted] = nil
            }
            self.grant = grant
            return true
        }
        framesRefused &+= 1
        participants[member]?.revocation?.lastRefusedFrame = now
        return false
    }

    /// Fires every timer due at `now`, earliest first, each with its transition.
    public mutating func expire(now: UInt64) -> Step {
        var step = Step()
        while let (timer, deadline) = earliestDue(now: now) {
            if case .endOfMedia = timer {} else { timers[timer] = nil }
            fire(timer, dueAt: deadline, now: now, into: &step)
        }
        return finished(step)
    }

    // MARK: Helpers

    /// Starts `timer` to fall due `interval` after `now`; at the end of the clock's range (where it would fall due
    /// at once, again and again) it does not start.
    mutating func arm(_ timer: Timer, now: UInt64, after interval: UInt64) {
        let deadline = later(now, interval)
        if deadline > now { timers[timer] = deadline } else { timers[timer] = nil }
    }

    /// `time` plus `interval`, at most the clock's last instant.
    func later(_ time: UInt64, _ interval: UInt64) -> UInt64 {
        let (sum, overflow) = time.addingReportingOverflow(interval)
        return overflow ? .max : sum
    }

    func finished(_ step: Step) -> Step {
        var step = step
        step.nextDeadline = nextDeadline
        return step
    }

    /// The running timer due earliest at `now`, ties broken in a fixed order so a run is the same every time.
    private func earliestDue(now: UInt64) -> (Timer, UInt64)? {
        var best: (timer: Timer, deadline: UInt64, rank: (Int, UInt64))?
        var candidates = timers.map { ($0.key, $0.value) }
        if let endOfMedia = deadline(of: .endOfMedia) { candidates.append((.endOfMedia, endOfMedia)) }
        for (timer, deadline) in candidates where deadline <= now {
            let rank = rank(of: timer)
            if let current = best, (current.deadline, current.rank.0, current.rank.1) <= (deadline, rank.0, rank.1) {
                continue
            }
            best = (timer, deadline, rank)
        }
        return best.map { ($0.timer, $0.deadline) }
    }

    private func rank(of timer: Timer) -> (Int, UInt64) {
        switch timer {
        case .endOfMedia: (0, 0)
        case .stopTalkingWarning: (1, 0)
        case .stopTalking: (2, 0)
        case .stopTalkingGrace: (3, 0)
        case .floorGranted: (4, 0)
        case .floorRevoke(let member): (5, UInt64(order.firstIndex(of: member) ?? 0))
        case .floorIdle: (6, 0)
        case .inactivity: (7, 0)
        }
    }
}

extension Duration {
    /// `nanoseconds` as a Duration.
    static func floorNanoseconds(_ nanoseconds: UInt64) -> Duration { .nanoseconds(Int64(clamping: nanoseconds)) }
}
