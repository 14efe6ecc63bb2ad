import TransportCore
import TransportIO

/// The part of `ConnectionBackend` that QUIC's and QMux's drivers share word for word: stream operations, close,
/// liveness, resumption status and early messages, over a `CoreConnection`. A driver supplies its output pump
/// (`process`, `processSoon`) and what only its transport does (see `ConnectionDriving+Events`).
protocol ConnectionDriving: ConnectionBackend, StreamOpening {
    associatedtype Core: CoreConnection
    /// The sans-IO connection; touched only on `loop`.
    var core: Core { get }
    /// The connection's one outbound datagram queue (validated at the API edge; expiry and counters).
    var outbound: DatagramQueue { get }
    /// Resumption status, diagnostic and early stream, readable from any thread.
    var resumption: ResumptionRecord { get }
    /// The client's refreshed resumption states (`sinks.resumptionStates`, kept for reads off the loop).
    var resumptionStates: ValueBroadcast<ResumptionState> { get }
    /// Client: what the next connection will need (loop only).
    var tracker: ResumptionTracker? { get set }
    /// Called once when the handshake completes, or with the error when the connection fails first (loop only).
    var onHandshakeResult: ((Result<Void, TransportError>) -> Void)? { get set }
    /// Drains events, writes what is ready, re-arms the timer (loop only).
    func process()
    /// Has `process` run soon, after the core was given work (loop only).
    func processSoon()
    /// Client: copies what the transport measured into `tracker` before a state is published (loop only).
    func measureForResumption()
    /// Takes a write the stream still accepts; resumes `continuation` once the bytes are the core's (loop only).
    func acceptWrite(stream: Int64, _ bytes: [UInt8], fin: Bool, _ continuation: CheckedContinuation<Void, any Error>)
}

extension ConnectionDriving {
    // MARK: - ConnectionBackend (any thread)

    func openStream() async throws -> IncomingStreamHandle { try await openStreamWaitingForCredit() }

    func openStreamInCore() throws -> Int64? { try core.openBidirectionalStream() }

    func openNoticeStreamInCore() throws -> Int64? { try core.openUnidirectionalStream() }

    func writeInCore(stream: Int64, _ bytes: [UInt8], fin: Bool) throws {
        try core.queue(stream: stream, bytes, fin: fin)
        processSoon()
    }

    func write(stream: Int64, _ bytes: [UInt8], fin: Bool) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute { [self] in
                if let refusal = sinks.writeRefusal(stream) {
                    continuation.resume(throwing: refusal)
                } else {
                    acceptWrite(stream: stream, bytes, fin: fin, continuation)
                }
            }
        }
    }

    func reset(stream: Int64, code: UInt64) {
        loop.execute { [self] in
            core.abandon(stream: stream, code: code)
            sinks.localReset(stream)
            processSoon()
        }
    }

    func stopSending(stream: Int64, code: UInt64) {
        loop.execute { [self] in
            core.stopSending(stream, code: code)
            processSoon()
        }
    }

    func consumed(stream: Int64, bytes: Int) {
        loop.execute { [self] in
            core.consumed(stream: stream, bytes: bytes)
            processSoon()
        }
    }

    var maxDatagramPayloadSize: Int { outbound.maxPayload }

    func close(code: UInt64, reason: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                closeNow(code: code, reason: reason)
                continuation.resume()
            }
        }
    }

    func closeSoon(code: UInt64, reason: String) {
        loop.execute { [self] in closeNow(code: code, reason: reason) }
    }

    private func closeNow(code: UInt64, reason: String) {
        guard core.closeReason == nil else { return }
        core.close(code: code, reason: reason, now: MonotonicClock.now())
        process()
    }

    func probeLiveness() {
        loop.execute { [self] in
            core.probeLiveness()
            process()
        }
    }

    /// The latest state to save (nil until the server sent a ticket).
    var resumptionState: ResumptionState? { resumptionStates.current }
    /// How this connection used saved state.
    var resumptionStatus: ResumptionStatus { resumption.status }
    /// The stream the early messages went on.
    var earlyStream: IncomingStreamHandle? { resumption.earlyStream }

    // MARK: - Loop side: resumption and early messages

    /// Calls `onHandshakeResult` once.
    func reportHandshake(_ result: Result<Void, TransportError>) {
        onHandshakeResult?(result)
        onHandshakeResult = nil
    }

    /// Client: records what the handshake resumed.
    func clientSawResumption() {
        resumption.status = ResumptionStatus(resumed: core.isResumed, earlyDataAccepted: core.earlyDataAccepted)
    }

    /// Server: what the client's ClientHello resumed, for `TransportConnection.resumption`.
    func serverSawResumption() {
        resumption.status = ResumptionStatus(
            serverResumed: core.isResumed, acceptedEarlyData: core.acceptedEarlyData)
    }

    /// Client: the early messages get stream `id`, readable as `earlyStream`.
    func openEarlyStream(_ id: Int64) {
        resumption.earlyStream = sinks.openStream(id)
    }

    /// Client: queues `messages`, framed, on the early stream `id`.
    func queueEarly(_ messages: [EarlyMessage], on id: Int64) {
        for message in messages { try? core.queue(stream: id, MessageFraming.frame(message.bytes), fin: false) }
    }

    /// Client, handshake done: sends the early messages still pending on the early stream (opening one when none
    /// went early); returns the early stream's ID.
    func sendPendingEarlyMessages(_ pending: [EarlyMessage], earlyStreamID: Int64?) -> Int64? {
        guard !pending.isEmpty else { return earlyStreamID }
        var id = earlyStreamID
        if id == nil, let opened = try? core.openBidirectionalStream() {
            id = opened
            openEarlyStream(opened)
        }
        if let id { queueEarly(pending, on: id) }
        return id
    }

    /// Client: publishes the state the next connection needs, once a ticket arrived.
    func refreshResumptionState() {
        guard tracker != nil else { return }
        measureForResumption()
        guard let state = tracker?.state() else { return }
        resumptionStates.publish(state)
    }
}
