import PTTTransport
import TransportCore
import TransportIO

/// Which `RelayChannel` one connection is in (at most one, process-wide) and where its datagrams go: the one
/// object a connection's datagram handler calls, so moving a connection between channels is one assignment on
/// the loop, and handlers installed by racing `join` calls are all equivalent.
///
/// Made on the connection's first join and kept until it closes (so a re-join never installs a handler that
/// routes elsewhere); it holds no reference to the connection, which stays releasable after it left.
final class ChannelMembership: @unchecked Sendable {
    // @unchecked Sendable invariant: `channel` and the liveness marks are read and written only on `loop`'s thread
    // (the connection's loop).
    let id: TransportConnection.ID
    let loop: EventLoop
    /// The connection's own `datagrams` buffer: where its frames go while it is in no channel.
    private let unclaimed: Mailbox<Datagram>
    /// The channel the connection is in, nil after it left.
    var channel: ChannelMembers?
    /// Liveness (`LivenessWatch`): its last frame (MonotonicClock), whether its channel watches it, and when the
    /// probe that is out was sent.
    var lastFrame: UInt64 = 0
    var watched = false
    var probeSince: UInt64?
    /// As a QUIC listener: the first frame sent to it since it was last heard from; whether it is watched as a
    /// listener; when it was probed as one.
    var awaitingSince: UInt64?
    var listenWatched = false
    var listenProbeSince: UInt64?
    /// Who the member is (its connection's name until a join names a user).
    var member: MemberIdentity
    /// Whether it may ask for the floor (a receive-only member's requests are denied with #5).
    var role = FloorRole.transmitAndReceive
    /// Catch-up (`CatchUpPacer`): the burst being replayed to it and the next sequence to send, while it is
    /// replayed (live frames of that burst are not sent to it meanwhile).
    var catchUp: (burst: UInt64, next: UInt32)?
    /// After a catch-up: live frames of this burst below this sequence were sent from the buffer already.
    var liveFrom: (burst: UInt64, sequence: UInt32)?

    private init(id: TransportConnection.ID, loop: EventLoop, unclaimed: Mailbox<Datagram>) {
        self.id = id
        self.loop = loop
        self.unclaimed = unclaimed
        member = MemberIdentity(anonymous: id)
    }

    /// Loop thread: whether a live frame at `position` goes to this member: not while it is replayed that burst
    /// (a frame of a newer burst ends the replay), nor a frame it was sent from the buffer already.
    func takesLive(_ position: FramePosition) -> Bool {
        if let catchUp {
            guard catchUp.burst != position.burst else { return false }
            self.catchUp = nil  // a newer burst: the old one's replay is moot, the member hears this one live
        }
        if let liveFrom, liveFrom.burst == position.burst, position.sequence < liveFrom.sequence { return false }
        return true
    }

    /// Loop thread: one datagram received from the connection.
    func receive(_ datagram: Datagram) {
        if let channel {
            channel.forward(datagram.payload, from: self)
        } else {
            unclaimed.send(datagram)
        }
    }

    /// Every connection that joined a channel and has not closed, by identity. Written on the connections' loops.
    private static let all = Locked<[TransportConnection.ID: ChannelMembership]>([:])

    /// Loop thread (`connection`'s): its membership, made on first use together with a watcher that takes it out
    /// of its channel when it closes. Nil when the connection has closed already: a closed connection joins
    /// nothing.
    static func of(_ connection: TransportConnection) -> ChannelMembership? {
        precondition(connection.backend.loop.inEventLoop, "channel membership used off the connection's loop")
        if case .closed = connection.status { return nil }
        let id = connection.id
        let (membership, made) = all.withLock { all -> (ChannelMembership, Bool) in
            if let existing = all[id] { return (existing, false) }
            let membership = ChannelMembership(
                id: id, loop: connection.backend.loop,
                unclaimed: connection.datagrams.base)
            all[id] = membership
            return (membership, true)
        }
        if made { membership.removeWhenClosed(connection.statusBroadcast) }
        return membership
    }

    /// The close is published on the loop: there, before anyone awaiting `closed()` hears of it, the member leaves
    /// its channel (its floor released, the event published).
    private func removeWhenClosed(_ status: StatusBroadcast) {
        let installed = status.onClose { [self] in
            // The loop publishes the close; should anything else, the removal hops to the loop.
            if loop.inEventLoop { leaveClosed() } else { loop.execute { [self] in leaveClosed() } }
        }
        if !installed { leaveClosed() }  // on the loop (`of`): closed between the check and here
    }

    /// Loop thread: the connection closed; out of its channel and the table.
    private func leaveClosed() {
        channel?.remove(self, reason: .closed)
        Self.all.withLock { all in
            if all[id] === self { all[id] = nil }
        }
    }
}
