import TransportCore

/// The application-facing side of one connection, shared by the QUIC and QMux drivers: the status broadcast,
/// the datagram and incoming-stream sequences, one inbox per stream, and the callers waiting to open or write.
/// Loop-confined: every method runs on the owning driver's event loop.
final class ConnectionSinks {
    let status = StatusBroadcast()
    /// Client: every refreshed resumption state (a NewSessionTicket, a NEW_TOKEN, the handshake's end).
    let resumptionStates = ValueBroadcast<ResumptionState>()
    /// The peer's address (`host:port`), and each new one after a NAT rebinding or a migration.
    let remoteAddresses = ValueBroadcast<String>()
    let datagrams: Mailbox<Datagram>
    /// When the peer was last heard from (the driver reports its core's last read after each pass).
    let activity = PeerActivity()
    let incoming = Mailbox<IncomingStreamHandle>()
    private var streams: [Int64: StreamInbox] = [:]
    /// The relay's notice streams (client side; unidirectional, opened by the server), with their bytes so far.
    private var noticeStreams: [Int64: [UInt8]] = [:]
    /// Client: the relay's notices (`RelayNotice`), in order.
    let relayNotices = ValueBroadcast<RelayNotice>()
    /// Relay: the notice went (a drain asks once, and again when a handshake that was open then completes).
    var relayNoticeSent = false
    /// Streams the peer sent STOP_SENDING for, and its code: writes to them fail with `streamStopped` until the
    /// connection forgets the stream (`streamClosed`), after which they fail as writes to a closed stream.
    private var stopped: [Int64: UInt64] = [:]
    /// An `openStream()` call waiting for the peer's stream limit (see `ConnectionDriver+Streams`).
    typealias PendingOpen = (
        ticket: PendingOpenTicket, continuation: CheckedContinuation<IncomingStreamHandle, any Error>
    )
    /// The calls waiting, in order.
    var pendingOpens: [PendingOpen] = []
    private(set) var writeWaiters: [Int64: [CheckedContinuation<Void, any Error>]] = [:]
    /// Received datagrams dropped because the application did not keep up (the buffer holds the newest).
    private(set) var datagramsDropped: UInt64 = 0
    /// When set, received datagrams go here, on the loop, instead of `datagrams`.
    var datagramHandler: (@Sendable (Datagram) -> Void)?
    /// Server, until the handshake completes: asked on the loop, for each of the peer's streams receiving early
    /// (0-RTT) bytes, who takes its messages before any reader sees them, so a relay can answer them in the turn
    /// they arrived (`EarlyStreamTap`). Cleared at the handshake's end and at the close (it may hold the
    /// connection).
    var earlyStreamHandler: ((IncomingStreamHandle) -> EarlyMessageTaker?)?

    init(datagramReceiveBuffer: Int) {
        datagrams = Mailbox(capacity: datagramReceiveBuffer)
    }

    func ready() {
        earlyStreamHandler = nil
        status.publish(.ready)
    }

    /// Ends a waiting `openStream()` call with `CancellationError` (nothing when it opened or failed already).
    func cancelPendingOpen(_ ticket: PendingOpenTicket) {
        guard let index = pendingOpens.firstIndex(where: { $0.ticket === ticket }) else { return }
        pendingOpens.remove(at: index).continuation.resume(throwing: CancellationError())
    }

    /// A new stream's receiving side; `peerOpened` also announces it on `incoming`.
    @discardableResult
    func openStream(_ id: Int64, peerOpened: Bool = false) -> IncomingStreamHandle {
        let inbox = StreamInbox()
        if peerOpened && id & 0x3 == 0x3 {  // server-initiated unidirectional: the transport's notice stream
            noticeStreams[id] = []
            return IncomingStreamHandle(id: id, inbox: inbox)
        }
        streams[id] = inbox
        let handle = IncomingStreamHandle(id: id, inbox: inbox)
        if peerOpened { incoming.send(handle) }
        return handle
    }

    func data(_ id: Int64, _ bytes: [UInt8], fin: Bool, isEarly: Bool) {
        if var notice = noticeStreams[id] {
            notice += bytes.prefix(RelayNotice.maximumLength - notice.count)
            noticeStreams[id] = fin ? nil : notice
            if fin, let decoded = RelayNotice(decoding: notice) { relayNotices.publish(decoded) }
            return
        }
        guard let inbox = streams[id] else { return }
        let taker = isEarly ? earlyStreamHandler?(IncomingStreamHandle(id: id, inbox: inbox)) : nil
        inbox.receive(bytes, fin: fin, isEarly: isEarly, offering: taker)
        if fin { streams[id] = nil }
    }

    func peerReset(_ id: Int64, code: UInt64) {
        streams.removeValue(forKey: id)?.end(
            .failed(
                TransportError(
                    .streamReset,
                    "the peer reset stream \(id) with code \(code)", applicationErrorCode: code)))
    }

    func localReset(_ id: Int64) {
        streams.removeValue(forKey: id)?.end(
            .failed(
                TransportError(
                    .streamClosed,
                    "stream \(id) was reset by this side")))
    }

    func peerStopSending(_ id: Int64, code: UInt64) {
        stopped[id] = code
        resumeWriters(id, error: stopError(id, code))
    }

    /// The connection forgot the stream (both parts finished): nothing is kept for it from here on.
    func streamClosed(_ id: Int64) {
        streams.removeValue(forKey: id)?.end(.finished)
        stopped.removeValue(forKey: id)
        resumeWriters(id, error: nil)
    }

    /// Streams with state kept here (an inbox or a STOP_SENDING code), for tests.
    var trackedStreams: Int { Set(streams.keys).union(stopped.keys).count }

    /// Why writing to `id` must fail now (the peer sent STOP_SENDING), or nil.
    func writeRefusal(_ id: Int64) -> TransportError? { stopped[id].map { stopError(id, $0) } }

    private func stopError(_ id: Int64, _ code: UInt64) -> TransportError {
        TransportError(
            .streamStopped, "the peer asked to stop sending on stream \(id) (code \(code))",
            applicationErrorCode: code)
    }

    func waitToWrite(_ id: Int64, _ continuation: CheckedContinuation<Void, any Error>) {
        writeWaiters[id, default: []].append(continuation)
    }

    func resumeWriters(_ id: Int64, error: TransportError?) {
        guard let waiters = writeWaiters.removeValue(forKey: id) else { return }
        for waiter in waiters {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
    }

    func deliver(_ datagram: Datagram) {
        if let datagramHandler {
            datagramHandler(datagram)
        } else if !datagrams.send(datagram) {
            datagramsDropped += 1
        }
    }

    /// Ends everything with `reason`: waiting callers get its error, every sequence finishes. Stream reads end
    /// normally when the peer closed cleanly (code 0) and throw the close error otherwise.
    func finish(_ reason: CloseReason) {
        let error = reason.error
        let streamEnd: StreamInbox.End
        if case .peer(code: 0, _) = reason { streamEnd = .finished } else { streamEnd = .failed(error) }
        for (_, inbox) in streams { inbox.end(streamEnd) }
        streams.removeAll()
        for waiter in pendingOpens { waiter.continuation.resume(throwing: error) }
        pendingOpens.removeAll()
        for (_, waiters) in writeWaiters { for waiter in waiters { waiter.resume(throwing: error) } }
        writeWaiters.removeAll()
        status.publish(.closed(reason))
        resumptionStates.finish()
        remoteAddresses.finish()
        relayNotices.finish()
        datagramHandler = nil
        earlyStreamHandler = nil
        datagrams.finish()
        incoming.finish()
    }
}
