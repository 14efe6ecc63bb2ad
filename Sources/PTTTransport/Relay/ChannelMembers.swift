import TransportIO

/// The members of one `RelayChannel` on one event loop of its server, and the forwarding among them. A channel has
/// one `ChannelMembers` per loop: a frame received on one loop goes to that loop's other members directly and, once
/// per frame, to each other loop that has members, which writes its own members' copies (so a frame costs one
/// hand-off per loop, not per listener, and the loops write their copies in parallel).
///
/// Loop-confined: membership changes run in jobs submitted to this loop, forwarding runs in the members' datagram
/// handlers and in hand-offs, on this same loop.
final class ChannelMembers: @unchecked Sendable {
    // @unchecked Sendable invariant: `members` is read and written only on `loop`'s thread; `siblings` is written
    // once, by `group`, before any other thread sees this object; `memberCount` is a lock.
    let loop: EventLoop
    private let lifetime: UInt64
    private let statistics: FanoutStatistics?
    /// Members on this loop, each with its join order across the channel; the sender is skipped when forwarding.
    private var members: [(connection: TransportConnection, membership: ChannelMembership, order: UInt64)] = []
    /// How many members this loop has, for the other loops to skip the hand-off when it has none.
    private let memberCount = Locked(0)
    /// The same channel on the server's other loops (weak: they refer to each other).
    private var siblings: [WeakChannelMembers] = []

    private init(loop: EventLoop, lifetime: UInt64, statistics: FanoutStatistics?) {
        self.loop = loop
        self.lifetime = lifetime
        self.statistics = statistics
    }

    /// One channel's members for each of `loops`, in that order, linked to each other.
    static func group(loops: [EventLoop], frameLifetime: Duration, statistics: FanoutStatistics?) -> [ChannelMembers] {
        let (seconds, attoseconds) = frameLifetime.components
        let lifetime = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        let group = loops.map { ChannelMembers(loop: $0, lifetime: lifetime, statistics: statistics) }
        for core in group {
            core.siblings = group.filter { $0 !== core }.map(WeakChannelMembers.init)
        }
        return group
    }

    /// Loop thread: the members' connections, each with its join order.
    var connections: [(order: UInt64, connection: TransportConnection)] { members.map { ($0.order, $0.connection) } }

    /// Loop thread: adds `connection` (the channel's `order`th join), taking it out of the channel it was in.
    /// Joining twice changes nothing.
    func add(_ connection: TransportConnection, _ membership: ChannelMembership, order: UInt64) {
        guard membership.channel !== self else { return }
        membership.channel?.remove(membership)
        members.append((connection, membership, order))
        memberCount.withLock { $0 = members.count }
        membership.channel = self
    }

    /// Loop thread: removes the member with this membership, if it is one.
    func remove(_ membership: ChannelMembership) {
        guard membership.channel === self else { return }
        members.removeAll { $0.membership === membership }
        memberCount.withLock { $0 = members.count }
        membership.channel = nil
    }

    /// Loop thread: removes the member `id`, if it is one.
    func remove(_ id: TransportConnection.ID) {
        guard let member = members.first(where: { $0.connection.id == id }) else { return }
        remove(member.membership)
    }

    /// Loop thread: every member leaves.
    func removeAll() {
        for member in members { member.membership.channel = nil }
        members.removeAll()
        memberCount.withLock { $0 = 0 }
    }

    /// Loop thread: one received frame to every other member of the channel, on every loop.
    func forward(_ payload: [UInt8], from sender: ChannelMembership) {
        guard !payload.isEmpty else { return }  // a peer's empty DATAGRAM: nothing to play, and nothing to send
        let received = MonotonicNow.nanoseconds()
        let deadline = received &+ lifetime
        let others = siblings.compactMap { sibling in
            sibling.members.flatMap { $0.memberCount.withLock { $0 } > 0 ? $0 : nil }
        }
        let tally = statistics.map { FrameTally(loops: 1 + others.count, received: received, statistics: $0) }
        for other in others {  // first, so the other loops write their copies while this one writes its own
            other.loop.execute { other.send(payload, deadline: deadline, skipping: nil, tally: tally) }
        }
        send(payload, deadline: deadline, skipping: sender, tally: tally)
    }

    /// Loop thread: one copy of a frame to each member here but `sender`.
    private func send(_ payload: [UInt8], deadline: UInt64, skipping sender: ChannelMembership?, tally: FrameTally?) {
        // The copies are written at the end of this loop turn (each listener's driver, then the send batch's
        // sendmmsg); the recorder, asked for before the drivers, runs right after the sendmmsg.
        let recorder = tally.map { ForwardingRecorder(loop: loop, tally: $0) }
        if let recorder { loop.flushAtEndOfTurn(recorder) }
        var copies = 0
        for member in members where member.membership !== sender {
            try? member.connection.backend.sendDatagram(payload, deadline: deadline)
            copies += 1
        }
        recorder?.copies = copies
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
        if let total { statistics.record(copies: total, latencyNanoseconds: MonotonicNow.nanoseconds() &- received) }
    }
}
