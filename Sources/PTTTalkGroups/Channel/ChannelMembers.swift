import PTTTransport
import Synchronization
import TransportCore
import TransportIO

/// The members of one `RelayChannel` on one event loop of its server, and the forwarding among them. A channel has
/// one `ChannelMembers` per loop: a frame received on one loop goes to that loop's other members directly and, once
/// per frame, to each other loop that has members, which writes its own members' copies (so a frame costs one
/// hand-off per loop, not per listener, and the loops write their copies in parallel).
///
/// Loop-confined: membership changes run in jobs submitted to this loop, forwarding runs in the members' datagram
/// handlers and in hand-offs, on this same loop.
final class ChannelMembers: @unchecked Sendable {
    // @unchecked Sendable invariant: `members`, `liveness` and `floorTimerID` are read and written only on `loop`'s
    // thread; `siblings` is written once, by `group`, before any other thread sees this object; `memberCount` is a
    // lock; `floor` is Sendable.
    let loop: EventLoop
    /// This loop's index among the server's loops (the floor arms a talker's idle timer by it).
    let slot: Int
    private let lifetime: UInt64
    private let statistics: FanoutStatistics?
    /// The channel's floor, shared by its loops (nil: every member's frames are forwarded).
    let floor: ChannelFloor?
    /// This loop's liveness checks (nil: none).
    private let liveness: LivenessWatch?
    /// The channel's burst buffer, shared by its loops (nil: frames are opaque and forwarded as they come).
    let burst: ChannelBurst?
    /// This loop's catch-ups (with a burst buffer).
    private let pacer: CatchUpPacer?
    /// The channel's side of the fleet's trunks (nil: a relay on its own).
    let trunk: ChannelTrunk?
    /// The floor's idle timer on this loop, made on first use.
    private var floorTimerID: Int?
    /// Members on this loop, each with its join order across the channel; the sender is skipped when forwarding.
    /// Each keeps its connection's backend beside it: forwarding a copy touches the backend only, not the public
    /// connection object (one cache miss fewer per copy with a thousand listeners).
    private var members: [Member] = []
    /// How many members this loop has, for the other loops to skip the hand-off when it has none.
    private let memberCount = Locked(0)
    /// Copies of frames this loop handed to its listeners' transports (written by this loop only, read by any).
    let copiesSent = Atomic<UInt64>(0)
    /// The same channel on the server's other loops (weak: they refer to each other).
    private var siblings: [WeakChannelMembers] = []

    private init(
        loop: EventLoop, slot: Int, lifetime: UInt64, statistics: FanoutStatistics?, floor: ChannelFloor?,
        liveness: LivenessCheck?, burst: ChannelBurst?, catchUps: CatchUpCounters, trunk: ChannelTrunk?
    ) {
        self.trunk = trunk
        self.loop = loop
        self.slot = slot
        self.lifetime = lifetime
        self.statistics = statistics
        self.floor = floor
        self.liveness = liveness.map(LivenessWatch.init)
        self.burst = burst
        pacer = burst.map { CatchUpPacer(burst: $0, counters: catchUps) }
    }

    /// One channel's members for each of `loops`, in that order, linked to each other (and to `floor`).
    static func group(
        loops: [EventLoop], frameLifetime: Duration, statistics: FanoutStatistics?, floor: ChannelFloor? = nil,
        liveness: LivenessCheck? = nil, burst: ChannelBurst? = nil, catchUps: CatchUpCounters = CatchUpCounters(),
        trunk: ChannelTrunk? = nil
    ) -> [ChannelMembers] {
        let lifetime = frameLifetime.nanoseconds
        let group = loops.enumerated().map { slot, loop in
            ChannelMembers(
                loop: loop, slot: slot, lifetime: lifetime, statistics: statistics, floor: floor, liveness: liveness,
                burst: burst, catchUps: catchUps, trunk: trunk)
        }
        for core in group {
            core.siblings = group.filter { $0 !== core }.map(WeakChannelMembers.init)
        }
        floor?.attach(group)
        return group
    }

    /// Loop thread: the members' connections, each with its join order.
    var connections: [(order: UInt64, connection: TransportConnection)] { members.map { ($0.order, $0.connection) } }

    /// Loop thread: drops every member's frames of `burst` (nil: every frame) still queued in its connection, not
    /// yet handed to the socket: the talker was pre-empted, and its audio must not overlap the new talker's.
    func dropQueuedFrames(of burst: UInt64?) {
        for member in members {
            member.backend.dropQueuedDatagrams { frame in
                guard let burst else { return true }
                return AudioFrameHeader.peek(frame)?.burst == burst
            }
        }
    }

    /// Loop thread: the connection of the member with `membership`, if it is one here.
    func connection(of membership: ChannelMembership) -> TransportConnection? {
        members.first { $0.membership === membership }?.connection
    }

    /// Loop thread: whether `id` is a member here.
    func contains(_ id: TransportConnection.ID) -> Bool { members.contains { $0.connection.id == id } }

    /// Loop thread: the membership of the member `id`, if it is one here.
    func membership(_ id: TransportConnection.ID) -> ChannelMembership? {
        members.first { $0.connection.id == id }?.membership
    }

    /// Loop thread: adds `connection` (the channel's `order`th join) as `member` (nil: the identity it has) in
    /// `role`, taking it out of the channel it was in. Joining twice changes nothing but the identity and role.
    func add(
        _ connection: TransportConnection, _ membership: ChannelMembership, order: UInt64, as member: MemberIdentity?,
        role: FloorRole = .transmitAndReceive
    ) {
        if let member { membership.member = member }
        membership.role = role
        guard membership.channel !== self else {
            // A new identity takes the seat over; a new role applies from here on.
            floor?.join(membership.member, role: role, id: membership.id, slot: slot)
            return
        }
        membership.channel?.remove(membership, reason: .left)
        membership.watched = false  // a new channel watches it afresh
        membership.probeSince = nil
        membership.catchUp = nil
        membership.liveFrom = nil
        members.append(
            Member(connection: connection, backend: connection.backend, membership: membership, order: order))
        memberCount.withLock { $0 = members.count }
        membership.channel = self
        floor?.join(membership.member, role: role, id: membership.id, slot: slot)
    }

    /// Loop thread: removes the member with this membership, if it is one; it loses the floor (or its place in
    /// line) for `reason`.
    func remove(_ membership: ChannelMembership, reason: FloorReleaseReason) {
        guard membership.channel === self else { return }
        if let index = members.firstIndex(where: { $0.membership === membership }) { members.remove(at: index) }
        memberCount.withLock { $0 = members.count }
        membership.channel = nil
        floor?.leave(membership.id, reason: reason)
    }

    /// Loop thread: removes the member `id`, if it is one (it left).
    func remove(_ id: TransportConnection.ID) {
        guard let member = members.first(where: { $0.connection.id == id }) else { return }
        remove(member.membership, reason: .left)
    }

    /// Loop thread: every member leaves, timers stop.
    func removeAll() {
        for member in members { member.membership.channel = nil }
        members.removeAll()
        memberCount.withLock { $0 = 0 }
        liveness?.stop(on: loop)
        pacer?.stop(on: loop)
        if let floorTimerID { loop.cancelTimer(floorTimerID) }
        floorTimerID = nil
    }

    /// Loop thread: the floor's timers run on this loop (the channel's first); run them at `deadline`.
    func armFloorTimer(at deadline: UInt64) {
        let id: Int
        if let floorTimerID {
            id = floorTimerID
        } else {
            id = loop.makeTimerID()
            floorTimerID = id
            loop.setTimerHandler(id) { [weak self] in self?.floorTimerFired() }
        }
        loop.arm(timer: id, at: deadline)
    }

    private func floorTimerFired() {
        guard let floor, let next = floor.timerFired(now: MonotonicClock.now()) else { return }
        armFloorTimer(at: next)
    }

    /// Loop thread: replays the buffered burst from `start` to the member `id`; false when it is not one here.
    func catchUp(_ id: TransportConnection.ID, from start: CatchUpStart) -> Bool {
        guard let pacer, let member = members.first(where: { $0.connection.id == id }) else { return false }
        pacer.start(member.connection, member.membership, at: start, on: self)
        return true
    }

    /// Loop thread: one received frame to every other member of the channel, on every loop.
    func forward(_ payload: [UInt8], from sender: ChannelMembership) {
        guard !payload.isEmpty else { return }  // a peer's empty DATAGRAM: nothing to play, and nothing to send
        let received = MonotonicClock.now()
        liveness?.frame(from: sender, now: received, in: self)
        if trunk?.admits(sender.member) == true {
            // The home (another relay) granted this member the floor: its frames go on.
        } else if let floor, !floor.admit(sender.id, now: received) {
            return  // not the talker: dropped, counted
        }
        // With a burst buffer only audio frames of the talker's burst go on (kept for late members), once each.
        let position: FramePosition?
        if let burst {
            guard let stored = burst.append(payload, now: received) else { return }
            position = stored
        } else {
            position = nil
        }
        trunk?.send(payload)  // one datagram per peer relay that follows the group
        fanOut(payload, received: received, skipping: sender, position: position)
    }

    /// Loop thread: a frame of the group's talker that a peer relay sent on its trunk: admitted by the floor as the
    /// home decided it (here, the home's own floor hears it as the talker's media), recorded in the burst buffer
    /// and fanned out to every member here, never sent on to another trunk (one hop). False when dropped.
    func forwardRelayed(_ payload: [UInt8]) -> Bool {
        guard !payload.isEmpty else { return false }
        let received = MonotonicClock.now()
        if let floor, let talker = floor.talker?.member, let seat = trunk?.remoteSeat(of: talker) {
            guard floor.admit(seat.id, now: received) else { return false }
        }
        let position: FramePosition?
        if let burst {
            guard let stored = burst.append(payload, now: received) else { return false }
            position = stored
        } else {
            position = nil
        }
        fanOut(payload, received: received, skipping: nil, position: position)
        return true
    }

    /// Loop thread: one admitted frame to every member of the channel but `sender`, on every loop.
    private func fanOut(
        _ payload: [UInt8], received: UInt64, skipping sender: ChannelMembership?, position: FramePosition?
    ) {
        let deadline = received &+ lifetime
        let others = siblings.compactMap { sibling in
            sibling.members.flatMap { $0.memberCount.withLock { $0 } > 0 ? $0 : nil }
        }
        let tally = statistics.map { FrameTally(loops: 1 + others.count, received: received, statistics: $0) }
        for other in others {  // first, so the other loops write their copies while this one writes its own
            other.loop.execute {
                other.send(payload, deadline: deadline, skipping: nil, position: position, tally: tally)
            }
        }
        send(payload, deadline: deadline, skipping: sender, position: position, tally: tally)
    }

    /// Loop thread: one copy of a frame to each member here but `sender` (and but those replaying the burst, or
    /// sent this frame from the buffer already).
    private func send(
        _ payload: [UInt8], deadline: UInt64, skipping sender: ChannelMembership?, position: FramePosition?,
        tally: FrameTally?
    ) {
        // The copies are written at the end of this loop turn (each listener's driver, then the send batch's
        // sendmmsg); the recorder, asked for before the drivers, runs right after the sendmmsg.
        let recorder = tally.map { ForwardingRecorder(loop: loop, tally: $0) }
        if let recorder { loop.flushAtEndOfTurn(recorder) }
        var copies = 0
        let now = liveness == nil ? 0 : MonotonicClock.now()
        for member in members where member.membership !== sender {
            if let position, !member.membership.takesLive(position) { continue }
            try? member.backend.sendDatagram(payload, deadline: deadline)
            liveness?.sent(to: member.membership, via: member.connection, now: now, in: self)
            copies += 1
        }
        recorder?.copies = copies
        copiesSent.wrappingAdd(UInt64(copies), ordering: .relaxed)
    }
}

/// Records one loop's share of a frame's forwarding once its copies left: its end-of-turn call comes before the
/// listeners' drivers write, and defers the record past the send batch's flush (deferred work runs after every
/// end-of-turn call).
private final class ForwardingRecorder: EndOfTurnFlushing {
    let loop: EventLoop
    let tally: FrameTally
    var copies = 0

    init(loop: EventLoop, tally: FrameTally) {
        self.loop = loop
        self.tally = tally
    }

    func flushAtEndOfTurn() {
        loop.deferUntilIdle { [self] in tally.finish(copies: copies) }
    }
}

/// One member of a channel on this loop.
private struct Member {
    let connection: TransportConnection
    /// `connection.backend`, read once at the join.
    let backend: any ConnectionBackend
    let membership: ChannelMembership
    /// Its join order across the channel.
    let order: UInt64
}

/// A weak reference to a channel's members on another loop.
struct WeakChannelMembers {
    weak var members: ChannelMembers?
}

/// One frame's forwarding across loops, for `FanoutStatistics`: recorded once, when the last loop wrote its copies.
final class FrameTally: Sendable {
    private let state: Locked<(remaining: Int, copies: Int)>
    private let received: UInt64
    private let statistics: FanoutStatistics

    init(loops: Int, received: UInt64, statistics: FanoutStatistics) {
        state = Locked((loops, 0))
        self.received = received
        self.statistics = statistics
    }

    /// One loop wrote its `copies`.
    func finish(copies: Int) {
        let total = state.withLock { state -> Int? in
            state.remaining -= 1
            state.copies += copies
            return state.remaining == 0 ? state.copies : nil
        }
        if let total { statistics.record(copies: total, latencyNanoseconds: MonotonicClock.now() &- received) }
    }
}
