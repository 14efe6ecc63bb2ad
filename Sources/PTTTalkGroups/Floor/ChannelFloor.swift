import PTTTransport
import TransportCore
import TransportIO

/// One channel's `FloorServer`, keyed by member identity and shared by the channel's loops: the state is read under
/// a lock per frame (one talker or none, channel-wide), each step's output becomes `FloorUpdate`s published under
/// the same lock (so every reader has them in the order they happened), and the server's timers (T1, T2 and its
/// warning, T3, T8, T20) run on the channel's first loop. With a burst buffer, each grant starts a burst and each
/// release ends it, in the same step.
final class ChannelFloor: Sendable {
    /// Where a member's connection lives: what events name, and the loop it is on.
    struct Seat: Sendable {
        let id: TransportConnection.ID
        let slot: Int
    }

    struct State: Sendable {
        var server: FloorServer<MemberIdentity>
        /// Each member's connection now (a member back on a new connection takes its seat over).
        var seats: [MemberIdentity: Seat] = [:]
        /// Who each connection is.
        var identities: [TransportConnection.ID: MemberIdentity] = [:]
        /// The burst the holder talks in.
        var burst: UInt64?
        /// The deadline a timer is armed for (nil: none).
        var armed: UInt64?
        /// Members that left in the step being published, with the connection events name them by.
        var departed: [MemberIdentity: TransportConnection.ID] = [:]
    }

    /// Every floor update, for any number of readers.
    let updates: EventBroadcast<FloorUpdate>
    private let state: Locked<State>
    /// The channel's members on each loop, by slot (set once by the channel); the timers run on the first.
    private let cores = Locked<[WeakChannelMembers]>([])
    /// The channel's burst buffer, whose bursts follow the grants.
    private let burst: ChannelBurst?
    /// Hears every update with its burst, under the lock, in order (it must return at once).
    private let observer: (@Sendable (FloorNotice) -> Void)?

    init(_ control: FloorControl, burst: ChannelBurst? = nil, observer: (@Sendable (FloorNotice) -> Void)? = nil) {
        state = Locked(State(server: FloorServer(configuration: control.configuration, now: MonotonicClock.now())))
        self.burst = burst
        self.observer = observer
        updates = EventBroadcast(capacity: 65_536)
    }

    deinit { updates.finish() }

    /// Links the floor to the channel's members on each loop (index = slot).
    func attach(_ members: [ChannelMembers]) {
        cores.withLock { $0 = members.map(WeakChannelMembers.init) }
    }

    // MARK: Inputs

    /// `member` joined on connection `id` in `role`, living on loop `slot` (a member back on a new connection keeps
    /// its floor or its place in line, and is told; one back as receive-only gives its place in line up).
    func join(_ member: MemberIdentity, role: FloorRole, id: TransportConnection.ID, slot: Int) {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, Void) in
            var step = FloorServer<MemberIdentity>.Step()
            if let previous = state.identities[id], previous != member, state.seats[previous]?.id == id {
                step.append(state.server.leave(previous, now: now))
                state.seats[previous] = nil
                state.departed[previous] = id
            }
            state.identities[id] = member
            state.seats[member] = Seat(id: id, slot: slot)
            step.append(state.server.join(member, role: role, now: now))
            return (step, .left, ())
        }
    }

    /// Connection `id` left the channel for `reason`: its member loses the floor or its place in line (unless the
    /// member is back on another connection already).
    func leave(_ id: TransportConnection.ID, reason: FloorReleaseReason) {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, Void) in
            guard let member = state.identities.removeValue(forKey: id), state.seats[member]?.id == id else {
                return (FloorServer<MemberIdentity>.Step(), reason, ())
            }
            state.seats[member] = nil
            state.departed[member] = id
            return (state.server.leave(member, now: now), reason, ())
        }
    }

    /// Floor Request from connection `id`: the answer (its events are published too).
    func request(_ id: TransportConnection.ID, _ request: FloorRequest) -> FloorRequestResult? {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, FloorRequestResult?) in
            guard let member = state.identities[id] else { return (.init(), .left, nil) }
            let step = state.server.request(member, request, now: now)
            let holder = state.server.holder.flatMap { state.seats[$0]?.id }
            var result: FloorRequestResult = .granted
            for message in step.messages(to: member) {
                switch message {
                case .queuePosition(let position, _): result = .queued(position: position)
                case .deny(let cause): result = .denied(holder: holder, cause: cause)
                case .granted: result = .granted
                default: break
                }
            }
            if state.server.holder == member { result = .granted }
            return (step, .left, result)
        }
    }

    /// Floor Release from connection `id`: whether it held the floor or waited.
    func release(_ id: TransportConnection.ID) -> Bool {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, Bool) in
            guard let member = state.identities[id] else { return (.init(), .released, false) }
            let involved = state.server.holder == member || state.server.queuePosition(of: member) != nil
            return (state.server.release(member, now: now), .released, involved)
        }
    }

    /// The application revokes the holder's floor: who held it.
    func revoke() -> TransportConnection.ID? {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, TransportConnection.ID?) in
            let holder = state.server.holder.flatMap { state.seats[$0]?.id }
            return (state.server.revoke(now: now), .revoked, holder)
        }
    }

    /// Takes the floor from its holder and empties the line, granting nobody: the members waiting are denied with
    /// no resources (#6) and ask again. Returns who held it.
    func revokeAndEmptyLine() -> TransportConnection.ID? {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, TransportConnection.ID?) in
            let holder = state.server.holder.flatMap { state.seats[$0]?.id }
            let emptied = state.server.setResources(available: false, now: now)
            let revoked = state.server.revoke(now: now)
            _ = state.server.setResources(available: true, now: now)
            var step = emptied
            step.messages += revoked.messages
            step.notices += revoked.notices
            step.nextDeadline = revoked.nextDeadline
            return (step, .revoked, holder)
        }
    }

    /// Any thread: whether a frame from connection `id` at `now` is forwarded (its member holds the floor); counts
    /// it otherwise.
    func admit(_ id: TransportConnection.ID, now: UInt64) -> Bool {
        state.withLock { state in
            guard let member = state.identities[id], state.seats[member]?.id == id else {
                state.server.refuseUnknownFrame()
                return false
            }
            return state.server.receiveMedia(from: member, now: now)
        }
    }

    /// The floor's timer fired on the first loop at `now`: runs what fell due, returns when to fire again.
    func timerFired(now: UInt64) -> UInt64? {
        run { state, now -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, UInt64?) in
            state.armed = nil
            let step = state.server.expire(now: now)
            state.armed = step.nextDeadline
            return (step, .left, step.nextDeadline)
        }
    }

    // MARK: What the floor knows

    /// The talker now.
    var holder: TransportConnection.ID? {
        state.withLock { state in state.server.holder.flatMap { state.seats[$0]?.id } }
    }

    /// The talker now, with its identity, and its burst (nil without a burst buffer).
    var talker: (member: MemberIdentity, burst: UInt64?)? {
        state.withLock { state in state.server.holder.map { ($0, state.burst) } }
    }

    /// Frames refused so far.
    var framesRefused: UInt64 { state.withLock { $0.server.framesRefused } }

    // MARK: Running a step

    /// Runs `input` under the lock and publishes its step's updates (`left` is the reason a `.left` release is
    /// reported with); arms the timer when the server's next deadline is earlier than the one armed.
    private func run<Result>(
        _ input: (inout State, UInt64) -> (FloorServer<MemberIdentity>.Step, FloorReleaseReason, Result)
    ) -> Result {
        let (result, arm) = state.withLock { state -> (Result, UInt64?) in
            let now = MonotonicClock.now()
            let (step, left, result) = input(&state, now)
            publish(step, left: left, now: now, in: &state)
            guard let next = step.nextDeadline ?? state.server.nextDeadline, state.armed.map({ next < $0 }) ?? true
            else { return (result, nil) }
            state.armed = next
            return (result, next)
        }
        if let arm, let core = cores.withLock({ $0.first?.members }) {
            core.loop.execute { core.armFloorTimer(at: arm) }
        }
        return result
    }

    /// The step's notices and messages as `FloorUpdate`s, in order: revokes first, then grants, releases and
    /// denials as they happened, then queue positions and talk-time warnings.
    private func publish(
        _ step: FloorServer<MemberIdentity>.Step, left: FloorReleaseReason, now: UInt64, in state: inout State
    ) {
        defer { state.departed.removeAll() }
        var events: [(FloorEvent, MemberIdentity, MemberIdentity?)] = []
        let seats = state.seats
        let departed = state.departed
        func seat(_ member: MemberIdentity) -> TransportConnection.ID? { seats[member]?.id ?? departed[member] }
        for delivery in step.messages {
            if case .revoke(let cause) = delivery.message, let id = seat(delivery.member) {
                events.append((.revoked(id, cause: cause), delivery.member, nil))
            }
        }
        for notice in step.notices {
            switch notice {
            case .granted(let member, _):
                if let id = seat(member) { events.append((.granted(id), member, nil)) }
            case .released(let member, let reason):
                if let id = seat(member) {
                    events.append((.released(id, reason: FloorReleaseReason(reason, left: left)), member, nil))
                }
            case .denied(let member, let cause):
                let holder = state.server.holder
                if let id = seat(member) {
                    events.append((.denied(id, holder: holder.flatMap(seat), cause: cause), member, holder))
                }
            case .queued, .inactive, .revokeIgnored:
                break  // a place in line is told by its queue position below
            }
        }
        for delivery in step.messages {
            guard let id = seat(delivery.member) else { continue }
            switch delivery.message {
            case .queuePosition(let position, _):
                events.append((.queued(id, position: position), delivery.member, state.server.holder))
            case .stopTalkingWarning(let remaining):
                events.append((.talkTimeWarning(id, remaining: remaining), delivery.member, nil))
            default: break
            }
        }
        for (event, member, holder) in events {
            var burstID: UInt64?
            switch event {
            case .granted:
                burstID = burst?.start(talker: member, now: now)
                state.burst = burstID
            case .released:
                burst?.end(now: now)
                burstID = state.burst
                state.burst = nil
            default: break
            }
            let update = FloorUpdate(event: event, member: member, holder: holder, at: now)
            updates.publish(update)
            observer?(FloorNotice(update: update, burst: burstID))
        }
    }
}

extension FloorServer.Step {
    /// Appends `other`'s messages and notices (its deadline replaces this one's).
    mutating func append(_ other: Self) {
        messages += other.messages
        notices += other.notices
        nextDeadline = other.nextDeadline
    }
}

extension FloorServer {
    /// A frame from a connection the floor does not know: refused and counted.
    mutating func refuseUnknownFrame() { framesRefused &+= 1 }
}

extension FloorReleaseReason {
    /// The channel's reason for the server's: a member that left is reported as `left` says (left, closed,
    /// unresponsive).
    init<Member>(_ reason: FloorServer<Member>.ReleaseReason, left: FloorReleaseReason) {
        switch reason {
        case .released: self = .released
        case .endOfMedia: self = .idle
        case .stopTalking: self = .talkTimeExceeded
        case .preempted: self = .preempted
        case .revoked: self = .revoked
        case .left: self = left
        }
    }
}

/// A floor update and, with a burst buffer, the burst a grant started or a release ended.
struct FloorNotice: Sendable {
    let update: FloorUpdate
    let burst: UInt64?
}
