import TransportIO

/// The members of one `RelayChannel` and the forwarding among them. Loop-confined: membership changes run in jobs
/// submitted to the server's loop, forwarding runs in the members' datagram handlers, on that same loop.
final class ChannelMembers: @unchecked Sendable {
    // @unchecked Sendable invariant: `members` is read and written only on `loop`'s thread.
    let loop: EventLoop
    private let lifetime: UInt64
    private let statistics: FanoutStatistics?
    /// In join order; the sender is skipped when forwarding.
    private var members: [(connection: TransportConnection, membership: ChannelMembership)] = []

    init(loop: EventLoop, frameLifetime: Duration, statistics: FanoutStatistics?) {
        self.loop = loop
        self.statistics = statistics
        let (seconds, attoseconds) = frameLifetime.components
        lifetime = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Loop thread: the members' connections, in join order.
    var connections: [TransportConnection] { members.map(\.connection) }

    /// Loop thread: adds `connection`, taking it out of the channel it was in. Joining twice changes nothing.
    func add(_ connection: TransportConnection, _ membership: ChannelMembership) {
        guard membership.channel !== self else { return }
        membership.channel?.remove(membership)
        members.append((connection, membership))
        membership.channel = self
    }

    /// Loop thread: removes the member with this membership, if it is one.
    func remove(_ membership: ChannelMembership) {
        guard membership.channel === self else { return }
        members.removeAll { $0.membership === membership }
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
    }

    /// Loop thread: one received frame to every other member.
    func forward(_ payload: [UInt8], from sender: ChannelMembership) {
        guard !payload.isEmpty else { return }  // a peer's empty DATAGRAM: nothing to play, and nothing to send
        let received = MonotonicNow.nanoseconds()
        let deadline = received &+ lifetime
        // The copies are written at the end of this loop turn (each listener's driver, then the send batch's
        // sendmmsg); the recorder, asked for before the drivers, runs right after the sendmmsg.
        let recorder = statistics.map {
            ForwardingRecorder(loop: loop, statistics: $0, copies: members.count - 1, received: received)
        }
        if let recorder { loop.flushAtEndOfTurn(recorder) }
        var copies = 0
        for member in members where member.membership !== sender {
            try? member.connection.backend.sendDatagram(payload, deadline: deadline)
            copies += 1
        }
        recorder?.copies = copies
    }
}

/// Records one frame's forwarding once its copies left: its end-of-turn call comes before the listeners' drivers
/// write, and defers the record past the send batch's flush (deferred work runs after every end-of-turn call).
private final class ForwardingRecorder: EndOfTurnFlushing {
    let loop: EventLoop
    let statistics: FanoutStatistics
    var copies: Int
    let received: UInt64

    init(loop: EventLoop, statistics: FanoutStatistics, copies: Int, received: UInt64) {
        self.loop = loop
        self.statistics = statistics
        self.copies = copies
        self.received = received
    }

    func flushAtEndOfTurn() {
        loop.deferUntilIdle { [self] in
            statistics.record(copies: copies, latencyNanoseconds: MonotonicNow.nanoseconds() &- received)
        }
    }
}
