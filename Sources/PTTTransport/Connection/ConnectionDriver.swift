import TransportCore
import TransportIO

/// A connection over QUIC: ngtcp2's packets through the loop's UDP send batch.
typealias QUICConnectionDriver = ConnectionDriver<UDPPacketPump>
/// A connection over TCP: QMux frames in TLS records through one TCP socket.
typealias QMuxConnectionDriver = ConnectionDriver<TLSStreamPump>

/// Joins one sans-IO connection, QUIC's or QMux's, to its event loop and to the public API's async sequences. It
/// turns core events into stream chunks, datagrams and status (`+Events`), runs the core's timer, keeps early data
/// and resumption (`+Early`), and has its `pump` write the core's output: the one `ConnectionBackend` of both
/// transports. Used for client connections (their own socket) and server connections alike.
final class ConnectionDriver<Pump: ConnectionPump>: ConnectionBackend, EndOfTurnFlushing, IdleDeferring,
    @unchecked Sendable
{
    // @unchecked Sendable invariant: every stored `var` and the pump are touched only on `loop`'s thread; methods
    // called from other threads read `let`s, use the locked `outbound`/`resumption`/`resumptionStates`, or hop with
    // `loop.execute`.
    let loop: EventLoop
    /// The socket side: writes the core's output, owns the socket.
    let pump: Pump
    /// The application-facing side: status, streams, datagrams, waiting callers.
    let sinks: ConnectionSinks
    /// The client's refreshed resumption states (`sinks.resumptionStates`, kept for reads off the loop).
    let resumptionStates: ValueBroadcast<ResumptionState>
    /// The connection's one outbound datagram queue (validated at the API edge; capacity, expiry and counters).
    let outbound: DatagramQueue
    /// Resumption status, diagnostic and early stream, readable from any thread.
    let resumption = ResumptionRecord()
    /// Early messages and datagrams waiting for the handshake (client), early datagrams held (server).
    var early = EarlyData()
    /// Client: what the next connection will need.
    var tracker: ResumptionTracker?
    /// Called once when the handshake completes, or with the error when the connection fails first.
    var onHandshakeResult: ((Result<Void, TransportError>) -> Void)?
    /// Called once when the connection is let go (server: forget it).
    var onFinished: (() -> Void)?
    private let timerID: Int
    /// The deadline the loop's timer is armed for (nil: not armed).
    private var armedTimeout: UInt64?
    /// A deadline was already due after the last pass: the next pass (later this turn) handles it first.
    private var dueTimerDeferred = false
    private var processScheduled = false
    /// The core's time of the last read, as last reported to `sinks.activity`: a pass that read nothing (a relay
    /// writing a forwarded copy) reports nothing, and touches neither the sinks nor the activity record.
    private var reportedHeard: UInt64 = 0
    private(set) var tornDown = false

    /// The sans-IO connection (loop only).
    var core: Pump.Core { pump.core }
    let createdAt = MonotonicClock.now()

    init(
        loop: EventLoop, pump: Pump, outbound: DatagramQueue, remote: SocketAddress, datagramReceiveBuffer: Int
    ) {
        precondition(loop.inEventLoop)
        self.loop = loop
        self.pump = pump
        self.outbound = outbound
        timerID = loop.makeTimerID()
        sinks = ConnectionSinks(datagramReceiveBuffer: datagramReceiveBuffer)
        resumptionStates = sinks.resumptionStates
        sinks.remoteAddresses.publish(remote.description)
        // Strong: `tearDown` cancels the timer, which drops the handler (a weak reference would slow every call).
        loop.setTimerHandler(timerID) { [self] in timerFired() }
    }

    // MARK: - Loop side: processing

    /// Has `process` run at the end of this loop turn, once however often it is asked (no closure per call; a
    /// server's send batch flushes after every connection wrote).
    func processSoon() {
        guard !processScheduled else { return }
        processScheduled = true
        loop.flushAtEndOfTurn(self)
    }

    func flushAtEndOfTurn() {
        processScheduled = false
        process()
    }

    /// The pass `process` deferred for a deadline that was already due.
    func runWhenIdle() { process() }

    /// Drains events, has the pump write, re-arms the timer; lets the connection go once it closed.
    func process() {
        guard !tornDown else { return }
        var handledDueTimer = false
        if dueTimerDeferred {
            dueTimerDeferred = false
            let now = MonotonicClock.now()
            if let deadline = core.nextTimeout, deadline <= now {
                core.handleTimeout(now: now)
                handledDueTimer = true
            }
        }
        let heard = core.lastHeard
        if heard != reportedHeard {
            reportedHeard = heard
            sinks.activity.heard(at: heard)
        }
        drainEvents()
        pump.writeOutput(self)
        if core.isClosed {
            // A write can close the connection too (ngtcp2 refused to write, the frame guard refused a packet, the
            // TCP socket failed): its `.closed` event comes after the drain above, and without it the application
            // would wait on a connection that is gone (found by the stateful fuzzer: `FuzzedConnectionsEndTests`).
            drainEvents()
            finishAfterClosing()
            return
        }
        // On 0.12.1 the pacing deadline of an application-limited burst was cleared by the write itself (see
        // `QUICConnection.finishWriteBurst`; on 1.x it lies the pacing interval ahead and the timer below takes
        // it). A deadline still due (a timer that came due during the pass) would
        // cost a loop round trip per connection as a timer: it is handled once more in this turn, after the send
        // batch went out (so not inside a relay's fan-out of the frame); if it is still due after that, the timer
        // below takes it. One expiry read per pass: ngtcp2 computes it from every timer of the connection.
        let next = core.nextTimeout
        if !handledDueTimer, let deadline = next, deadline <= MonotonicClock.now() {
            dueTimerDeferred = true
            loop.deferUntilIdle(self)  // `runWhenIdle`: no closure per connection per burst
            return
        }
        // Re-arm only when the deadline moved: each schedule adds a heap entry to the loop's timer queue.
        if let deadline = next {
            if deadline != armedTimeout {
                armedTimeout = deadline
                loop.arm(timer: timerID, at: deadline)  // runs `timerFired`
            }
        } else if armedTimeout != nil {
            armedTimeout = nil
            loop.disarm(timer: timerID)
        }
    }

    /// The connection's timer (installed once; `process` arms it for the core's next deadline).
    private func timerFired() {
        armedTimeout = nil
        core.handleTimeout(now: MonotonicClock.now())
        process()
    }

    /// After closing: at once, or at the pump's deadline (QUIC's server closing period, QMux's last bytes).
    private func finishAfterClosing() {
        guard let deadline = pump.closingDeadline(now: MonotonicClock.now()) else { return tearDown() }
        armedTimeout = nil
        loop.schedule(timer: timerID, at: deadline) { [self] in tearDown(closingTimedOut: true) }
    }

    /// Lets the connection go: stops its timer, has the pump close what it owns, calls `onFinished` once.
    func tearDown(closingTimedOut: Bool = false) {
        guard !tornDown else { return }
        tornDown = true
        loop.cancelTimer(timerID)
        pump.release(closingTimedOut: closingTimedOut)
        onFinished?()
        onFinished = nil
    }

    // MARK: - ConnectionBackend (any thread)

    func write(stream: Int64, _ bytes: [UInt8], fin: Bool) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute { [self] in
                if let refusal = sinks.writeRefusal(stream) {
                    continuation.resume(throwing: refusal)
                } else {
                    pump.acceptWrite(self, stream: stream, bytes, fin: fin, continuation)
                }
            } orIfStopped: {
                continuation.resume(throwing: TransportError(.cancelled, "the event loop has stopped"))
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

    func sendDatagram(_ payload: [UInt8], deadline: UInt64) throws(TransportError) {
        if loop.inEventLoop {
            // A relay forwarding from the loop: no job hop; the frames go out at the end of the turn.
            _ = try outbound.offer(payload, deadline: deadline, wake: false)
            processSoon()
        } else if try outbound.offer(payload, deadline: deadline, wake: true) {
            loop.execute { [self] in
                outbound.woken()
                processSoon()
            }
        }
    }

    var maxDatagramPayloadSize: Int { outbound.maxPayload }

    func dropQueuedDatagrams(where matches: ([UInt8]) -> Bool) -> Int { outbound.drop(where: matches) }

    var datagramBacklog: Int { outbound.count }

    func setDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) async {
        _ = try? await loop.submit { [self] in installDatagramHandler(handler) }
    }

    func installDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) {
        assert(loop.inEventLoop, "installDatagramHandler runs on the connection's loop")
        sinks.datagramHandler = handler
        // Early datagrams delivered at once arrive before the application could install its handler (it gets
        // the connection in the same loop turn): hand the ones still unread to the handler, so a relay
        // forwards a woken talker's first frames as soon as it took the connection.
        if !core.isClient && !early.holdsDatagrams && !core.isHandshakeCompleted {
            for datagram in sinks.datagrams.takeAll() { handler(datagram) }
        }
    }

    func installEarlyStreamHandler(_ handler: @escaping (IncomingStreamHandle) -> EarlyMessageTaker?) {
        assert(loop.inEventLoop, "installEarlyStreamHandler runs on the connection's loop")
        guard !core.isClient, !core.isHandshakeCompleted, sinks.status.current == .connecting else { return }
        sinks.earlyStreamHandler = handler
    }

    func close(code: UInt64, reason: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                closeNow(code: code, reason: reason)
                continuation.resume()
            } orIfStopped: {
                continuation.resume()  // a stopped loop closed its connections
            }
        }
    }

    func closeSoon(code: UInt64, reason: String) {
        loop.execute { [self] in closeNow(code: code, reason: reason) }
    }

    private func closeNow(code: UInt64, reason: String) {
        guard !core.isClosed else { return }
        core.close(code: code, reason: reason, now: MonotonicClock.now())
        process()
    }

    func probeLiveness() {
        loop.execute { [self] in
            core.probeLiveness()
            process()
        }
    }

    func statistics() async -> ConnectionStatistics {
        (try? await loop.submit { [self] in pump.statistics(self) }) ?? ConnectionStatistics()
    }

    func migrate(to local: SocketAddress) async throws -> String { try await pump.migrate(self, to: local) }

    func updateKeys() async throws {
        try await loop.submit { [self] in try pump.updateKeys(self) }
    }
}

extension Collection {
    /// How many of these connections have not closed yet.
    func openCount<Pump>() -> Int where Element == ConnectionDriver<Pump> {
        reduce(0) { $0 + ($1.core.isClosed ? 0 : 1) }
    }
}
