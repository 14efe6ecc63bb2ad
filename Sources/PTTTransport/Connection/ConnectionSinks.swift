import TransportCore

/// The application-facing side of one connection, shared by the QUIC and QMux drivers: the status, datagram
/// and incoming-stream sequences, one chunk sequence per stream, and the callers waiting to open or write.
/// Loop-confined: every method runs on the owning driver's event loop.
final class ConnectionSinks {
    let status: AsyncStream<ConnectionStatus>
    let datagrams: AsyncStream<Datagram>
    let incoming: AsyncStream<IncomingStreamHandle>
    private let statusSink: AsyncStream<ConnectionStatus>.Continuation
    private let datagramSink: AsyncStream<Datagram>.Continuation
    private let incomingSink: AsyncStream<IncomingStreamHandle>.Continuation
    private var streams: [Int64: AsyncThrowingStream<StreamChunkEvent, any Error>.Continuation] = [:]
    private var stopped: [Int64: UInt64] = [:]
    var pendingOpens: [CheckedContinuation<IncomingStreamHandle, any Error>] = []
    private(set) var writeWaiters: [Int64: [CheckedContinuation<Void, any Error>]] = [:]
    /// Received datagrams dropped because the application did not keep up (the buffer holds the newest).
    private(set) var datagramsDropped: UInt64 = 0
    /// When set, received datagrams go here, on the loop, instead of `datagrams`.
    var datagramHandler: (@Sendable (Datagram) -> Void)?

    init(datagramReceiveBuffer: Int) {
        (status, statusSink) = AsyncStream.makeStream(of: ConnectionStatus.self)
        (datagrams, datagramSink) = AsyncStream.makeStream(
            of: Datagram.self, bufferingPolicy: .bufferingNewest(max(1, datagramReceiveBuffer)))
        (incoming, incomingSink) = AsyncStream.makeStream(of: IncomingStreamHandle.self)
        statusSink.yield(.connecting)
    }

    func ready() { statusSink.yield(.ready) }

    /// A new stream's receiving side; `peerOpened` also announces it on `incoming`.
    @discardableResult
    func openStream(_ id: Int64, peerOpened: Bool = false) -> IncomingStreamHandle {
        let (chunks, sink) = AsyncThrowingStream.makeStream(of: StreamChunkEvent.self, throwing: (any Error).self)
        streams[id] = sink
        let handle = IncomingStreamHandle(id: id, chunks: chunks)
        if peerOpened { incomingSink.yield(handle) }
        return handle
    }

    func data(_ id: Int64, _ bytes: [UInt8], fin: Bool, isEarly: Bool) {
        guard let sink = streams[id] else { return }
        sink.yield(StreamChunkEvent(bytes: bytes, fin: fin, isEarly: isEarly))
        if fin {
            sink.finish()
            streams[id] = nil
        }
    }

    func peerReset(_ id: Int64, code: UInt64) {
        streams.removeValue(forKey: id)?.finish(throwing: TransportError(.streamReset,
            "the peer reset stream \(id) with code \(code)", applicationErrorCode: code))
    }

    func localReset(_ id: Int64) {
        streams.removeValue(forKey: id)?.finish(throwing: TransportError(.streamClosed,
            "stream \(id) was reset by this side"))
    }

    func peerStopSending(_ id: Int64, code: UInt64) {
        stopped[id] = code
        resumeWriters(id, error: stopError(id, code))
    }

    func streamClosed(_ id: Int64) {
        streams.removeValue(forKey: id)?.finish()
        resumeWriters(id, error: nil)
    }

    /// Why writing to `id` must fail now (the peer sent STOP_SENDING), or nil.
    func writeRefusal(_ id: Int64) -> TransportError? { stopped[id].map { stopError(id, $0) } }

    private func stopError(_ id: Int64, _ code: UInt64) -> TransportError {
        TransportError(.streamStopped, "the peer asked to stop sending on stream \(id) (code \(code))",
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
        } else if case .dropped = datagramSink.yield(datagram) {
            datagramsDropped += 1
        }
    }

    /// Ends everything with `reason`: waiting callers get its error, every sequence finishes.
    func finish(_ reason: CloseReason) {
        let error = reason.error
        for (_, sink) in streams { sink.finish(throwing: error) }
        streams.removeAll()
        for waiter in pendingOpens { waiter.resume(throwing: error) }
        pendingOpens.removeAll()
        for (_, waiters) in writeWaiters { for waiter in waiters { waiter.resume(throwing: error) } }
        writeWaiters.removeAll()
        statusSink.yield(.closed(reason))
        statusSink.finish()
        datagramHandler = nil
        datagramSink.finish()
        incomingSink.finish()
    }
}
