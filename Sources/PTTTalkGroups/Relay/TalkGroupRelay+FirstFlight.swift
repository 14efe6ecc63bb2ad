import PTTTransport
import TransportCore

/// A woken phone's first flight answered on the event loop: with an `ImmediateAuthenticator` (and no fleet), the
/// 0-RTT join and catch-up are acted on in the loop turn that read them — the member added to its channel and the
/// first buffered frames queued as 0.5-RTT datagrams before the turn ends — with no hop to the connection's tasks
/// (each hop delays the phone's first audio). Replay safety as in `EarlyRequests`: only early data the transport
/// accepted (the ticket's single-use claim succeeded, so a replayed flight never gets here), and only the
/// replay-safe requests. What the loop does not take (another request, a join that replaces another connection of
/// the user or moves it between groups, a refused credential, a refused catch-up) stays on the stream for the
/// connection's task, which handles it as any other and answers errors.
extension TalkGroupRelay {
    /// Installs the loop's answer to first flights, when the relay can give one.
    func answerFirstFlightsOnTheLoop() {
        guard case .immediate = admission, configuration.fleet == nil else { return }
        server.earlyStreams.set { [weak self] connection, stream in self?.answerAtOnce(connection, stream) }
    }

    /// Loop thread: who takes the early requests at the head of `stream` that can be acted on now (nil: none can).
    private func answerAtOnce(_ connection: TransportConnection, _ stream: TransportStream) -> ((Message) -> Bool)? {
        guard EarlyRequests.earlyDataAccepted(connection) else { return nil }
        let entry = connections.entry(connection)
        let outbox = connections.outbox(stream, in: entry)
        return { [self] message in
            guard message.isEarly, let request = try? TalkGroupMessage(decoding: message.bytes), request.isReplaySafe
            else { return false }
            switch request {
            case .join(let join):
                return joinAtOnce(join, outbox: outbox, entry: entry)
            case .catchUp(let group, let burst, let from):
                return catchUpAtOnce(group, burst: burst, from: from, outbox: outbox, entry: entry)
            default:
                return false
            }
        }
    }

    /// A join recorded and added to its channel on the loop; false (nothing changed) when it needs the task.
    private func joinAtOnce(
        _ join: TalkGroupMessage.JoinRequest, outbox: StreamOutbox, entry: RelayConnections.Entry
    ) -> Bool {
        guard case .immediate(let admits) = admission, admits(join) else { return false }
        let connection = outbox.connection
        let recorded = state.withLock { state -> (RelayChannel, MemberRoster.Joined)? in
            // Replacing another live connection of the user, or moving it between groups, closes and leaves on
            // other loops: the task does that.
            if let session = state.sessions[join.user], session.connection !== connection { return nil }
            if let member = state.roster.member(join.user), member.group != join.group { return nil }
            guard let (channel, joined, _, _) = try? record(join, outbox: outbox, in: &state) else { return nil }
            return (channel, joined)
        }
        guard let (channel, joined) = recorded, channel.joinOnLoop(connection, as: join.user, role: join.role) else {
            return false
        }
        entry.joined.withLock { $0 = join.user }
        outbox.send(.joined(group: join.group, user: join.user, current: channel.heldBurst))
        loopEventQueue.yield(.joined(user: join.user, group: join.group, early: true, replaced: joined.replaced != nil))
        return true
    }

    /// A catch-up started on the loop, its first frames queued; false (nothing started) when it needs the task.
    private func catchUpAtOnce(
        _ group: String, burst: UInt64, from: UInt32, outbox: StreamOutbox, entry: RelayConnections.Entry
    ) -> Bool {
        guard let (user, channel) = try? member(on: outbox.connection, in: group, joined: entry.joined),
            case .success(let start)? = channel.catchUpOnLoop(outbox.connection, burst: burst, from: from)
        else { return false }
        outbox.send(.catchUpStarted(group: group, burst: start.burst, from: start.from, next: start.next))
        loopEventQueue.yield(
            .catchUp(user: user, group: group, burst: start.burst, from: start.from, next: start.next))
        return true
    }
}
