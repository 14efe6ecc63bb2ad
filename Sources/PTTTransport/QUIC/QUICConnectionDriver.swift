import TransportCore
import TransportIO

/// Joins one sans-IO `QUICConnection` to its event loop and socket, and to the public API's async sequences:
/// it turns core events into stream chunks, datagrams and status, and core output into UDP packets.
///
/// Used for both client connections (own connected socket) and server connections (the server's shared socket).
final class QUICConnectionDriver: ConnectionEventHandling, EndOfTurnFlushing, @unchecked Sendable {
    // @unchecked Sendable invariant: every stored `var` is touched only on `loop`'s thread (methods called from
    // other threads only read `let`s, lock `resumption`/`outbound`, or hop with `loop.execute`).
    let loop: EventLoop
    let core: QUICConnection
    /// The socket packets go out on (client: replaced by the new one when a migration succeeds).
    var socket: UDPSocket
    /// Where this connection's packets queue until the end of the loop turn (shared by a server's connections;
    /// a client's is replaced with its socket when a migration succeeds).
    var sender: UDPSendBatch
    let remote: SocketAddress
    /// Server: the peer address packets go to now (the handshake's, until a rebinding moves it).
    private var currentRemote: SocketAddress
    var local: SocketAddress
    let isClient: Bool
    let timerID: Int
    let maximumSendBuffer: UInt64 = 1 << 20

    let sinks: ConnectionSinks
    /// The client's refreshed resumption states (`sinks.resumptionStates`, kept here for reads off the loop).
    let resumptionStates: ValueBroadcast<ResumptionState>
    /// The core's datagram queue, which the application offers into directly.
    let outbound: DatagramQueue
    private var flushScheduled = false
    /// The send batch was full and the socket buffer too: writing resumes when it has room.
    var waitingForRoom = false
    /// Client: the migration validating its new path, and the socket a finished one left (see `+Migration`).
    var migration: PendingMigration?
    var retiredSocket: UDPSocket?
    var retiredSocketTimerID: Int?
    private var tornDown = false

    /// Called once when the handshake completes, or with the error when the connection fails first.
    var onHandshakeResult: ((Result<Void, TransportError>) -> Void)?
    /// Client: called when the first packet from the server arrives (handshake progress, for racing TCP).
    var onFirstPacket: (() -> Void)?
    /// Called once when the connection is finished with, after its closing period (server: unroute it).
    var onFinished: (() -> Void)?

    /// Client: what the next connection will need.
    var tracker: ResumptionTracker?
    /// Client: early messages still to send once the handshake completes.
    private var pendingEarlyMessages: [EarlyMessage] = []
    private var earlyStreamID: Int64?
    /// Client: early datagrams waiting for the handshake (no 0-RTT this time).
    private var pendingEarlyDatagrams: [[UInt8]] = []
    /// Server in 0.5-RTT mode: datagrams that arrived in 0-RTT wait here until the handshake completes. When
    /// false, early datagrams go to the application at once (`EarlyDataPolicy.deliverEarlyDatagrams`).
    var holdEarlyDatagrams = false
    private var heldDatagrams: [Datagram] = []
    let resumption = ResumptionRecord()

    init(
        loop: EventLoop, core: QUICConnection, sender: UDPSendBatch, remote: SocketAddress, local: SocketAddress,
        isClient: Bool, datagramReceiveBuffer: Int
    ) {
        precondition(loop.inEventLoop)
        self.loop = loop
        self.core = core
        self.socket = sender.socket
        self.sender = sender
        self.remote = remote
        self.currentRemote = remote
        self.local = local
        self.isClient = isClient
        self.timerID = loop.makeTimerID()
        sinks = ConnectionSinks(datagramReceiveBuffer: datagramReceiveBuffer)
        resumptionStates = sinks.resumptionStates
        sinks.remoteAddresses.publish(remote.description)
        outbound = core.datagrams
        // Strong: `tearDown` cancels the timer, which drops the handler (a weak reference would slow every call).
        loop.setTimerHandler(timerID) { [self] in timerFired() }
    }

    // MARK: - Loop side: inputs

    /// Client: reads everything waiting on the connected socket, and on the sockets of a migration's new path or
    /// the path it left (packets already in flight there still count).
    func socketReadable() {
        let error = receiveAll(from: socket)
        for other in [migration?.socket, retiredSocket].compactMap({ $0 }) { _ = receiveAll(from: other) }
        if let failure = error, !core.isHandshakeCompleted {
            // ICMP port/host unreachable before the handshake: the server is not there (or UDP is blocked).
            core.close(code: 0, reason: "", now: MonotonicClock.now())
            let unreachable = TransportError(
                failure.code, "the server at \(remote) is unreachable over UDP (\(failure.message))",
                libraryCode: failure.libraryCode)
            reportHandshake(.failure(unreachable))
        }
        process()
    }

    /// Feeds the core everything waiting on one client socket; returns the error that stopped the reading.
    private func receiveAll(from source: UDPSocket) -> TransportError? {
        var error: TransportError?
        loop.withScratchBuffer { buffer in
            for _ in 0..<256 {
                do throws(TransportError) {
                    guard let received = try source.receive(into: buffer) else { break }
                    onFirstPacket?()
                    onFirstPacket = nil
                    core.receive(
                        packet: UnsafeRawBufferPointer(rebasing: buffer[..<received.length]),
                        from: remote, to: source.localAddress, ecn: received.ecn, now: MonotonicClock.now())
                } catch let failure {
                    error = failure
                    break
                }
            }
        }
        return error
    }

    /// Server: a packet for this connection was fed to the core; process at the end of the loop iteration.
    func scheduleProcess() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.flushAtEndOfTurn(self)  // no closure per call; the send batch flushes after every driver wrote
    }

    func flushAtEndOfTurn() {
        flushScheduled = false
        process()
    }

    /// The deadline the loop's timer is armed for (nil: not armed).
    private var armedTimeout: UInt64?
    /// A deadline was already due after the last pass: the next pass (later this turn) handles it first.
    private var dueTimerDeferred = false

    /// Drains events, writes packets, re-arms the timer; tears down once closed.
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
        sinks.activity.heard(at: core.lastPacketRead)
        drainEvents()
        flush()
        if core.isClosed {
            // A write can close the connection too (ngtcp2 refused to write, or the frame guard refused a
            // packet): its `.closed` event comes after the drain above, and without it the application would
            // wait on a connection that is gone (found by the stateful fuzzer: `FuzzedConnectionsEndTests`).
            drainEvents()
            finishAfterClosing()
            return
        }
        // After each burst ngtcp2's pacing deadline is "now" (cwnd far from full): a timer for it would fire at
        // once and cost a loop round trip per connection per burst. A deadline already due is handled once more
        // in this turn, after the send batch went out (so not inside a relay's fan-out of the frame); if it is
        // still due after that, the timer below takes it.
        // One expiry read per pass: ngtcp2 computes it from every timer of the connection.
        let next = core.nextTimeout
        if !handledDueTimer, let deadline = next, deadline <= MonotonicClock.now() {
            dueTimerDeferred = true
            loop.deferUntilIdle { [self] in process() }
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

    /// The connection's timer (installed once; `process` arms it for ngtcp2's next deadline).
    private func timerFired() {
        armedTimeout = nil
        core.handleTimeout(now: MonotonicClock.now())
        process()
    }

    // MARK: - Loop side: events

    func handleTransportEvent(_ event: QUICEvent) {
        switch event {
        case .streamData(let id, let bytes, let fin, let isEarly):
            if isEarly && !isClient { serverSawResumption() }  // 0.5-RTT: known before the handshake ends
            sinks.data(id, bytes, fin: fin, isEarly: isEarly)
        case .streamWritable(let id):
            if core.bufferedBytes(stream: id) <= maximumSendBuffer { sinks.resumeWriters(id, error: nil) }
        case .datagram(let bytes, let isEarly):
            if holdEarlyDatagrams && !core.isHandshakeCompleted {
                if heldDatagrams.count < 64 { heldDatagrams.append(Datagram(payload: bytes, isEarly: isEarly)) }
            } else {
                sinks.deliver(Datagram(payload: bytes, isEarly: isEarly))
            }
        case .pathValidated(let address, let succeeded):
            // Report a move only once the peer answered on the new path (an unanswered probe, e.g. a replayed
            // packet from another address, leaves the call where it was).
            if succeeded, !isClient, address == core.currentRemote, address != currentRemote {
                currentRemote = address
                sinks.remoteAddresses.publish(address.description)
            }
            if isClient, let outcome = core.takeMigrationOutcome() { migrationDidFinish(outcome) }
        default:
            break
        }
    }

    func handshakeDidComplete() {
        for datagram in heldDatagrams { sinks.deliver(datagram) }
        heldDatagrams.removeAll()
    }

    // MARK: - Client: fast wake

    /// Before the first packet: sends the replay-safe prefix of `messages` on a new stream, which makes it 0-RTT
    /// when the resumed session allows; the rest waits for the handshake.
    func startEarlyMessages(_ messages: [EarlyMessage], resumptionDiagnostic: String?) {
        resumption.diagnostic = resumptionDiagnostic ?? core.resumptionDiagnostic
        guard !messages.isEmpty else { return }
        let safe = core.earlyDataAttempted ? Array(messages.prefix { $0.replaySafe }) : []
        pendingEarlyMessages = Array(messages.dropFirst(safe.count))
        guard !safe.isEmpty, let id = try? core.openBidirectionalStream() else {
            pendingEarlyMessages = messages
            return
        }
        earlyStreamID = id
        openEarlyStream(id)
        queueEarly(safe, on: id)
    }

    /// Before the first packet: queues a woken talker's first frames, so they ride in 0-RTT when the resumed
    /// session allows; otherwise they wait for the handshake (before it the server's DATAGRAM support is unknown).
    /// A frame the core refuses is counted as rejected.
    func startEarlyDatagrams(_ payloads: [[UInt8]]) {
        guard core.earlyDataAttempted else {
            pendingEarlyDatagrams = payloads
            return
        }
        sendEarlyDatagrams(payloads)
    }

    private func sendEarlyDatagrams(_ payloads: [[UInt8]]) {
        for payload in payloads {
            do {
                try core.sendDatagram(payload)
            } catch {
                core.noteDatagramRejected()
            }
        }
    }

    func clientHandshakeCompleted() {
        clientSawResumption()
        earlyStreamID = sendPendingEarlyMessages(pendingEarlyMessages, earlyStreamID: earlyStreamID)
        pendingEarlyMessages.removeAll()
        sendEarlyDatagrams(pendingEarlyDatagrams)
        pendingEarlyDatagrams.removeAll()
        tracker?.transportParameters = core.encodedPeerTransportParameters
        refreshResumptionState()
    }

    func measureForResumption() {
        let statistics = core.statistics
        tracker?.smoothedRTT = statistics.smoothedRTT
        tracker?.quicVersion = statistics.negotiatedVersion
    }

    /// Why saved state was ignored or only partly used.
    var resumptionDiagnostic: String? { resumption.diagnostic }

    func connectionWillFinish(_ reason: CloseReason) {
        refreshResumptionState()  // keep the last RTT
        abandonMigration(reason.error)
    }

    /// After closing: a client stops at once; a server keeps answering with CONNECTION_CLOSE for 3 PTO.
    private func finishAfterClosing() {
        if isClient {
            tearDown()
            return
        }
        let deadline = MonotonicClock.now() + max(core.closingPeriod, 1_000_000)
        armedTimeout = nil
        loop.schedule(timer: timerID, at: deadline) { [self] in tearDown() }
    }

    private func tearDown() {
        guard !tornDown else { return }
        tornDown = true
        loop.cancelTimer(timerID)
        if isClient {
            sender.flush()  // the CONNECTION_CLOSE queued this turn
            for client in [socket, migration?.socket, retiredSocket].compactMap({ $0 }) {
                loop.unregister(fd: client.fd)
                client.close()
            }
            retiredSocketTimerID.map(loop.cancelTimer)
        }
        onFinished?()
        onFinished = nil
    }

    // MARK: - ConnectionBackend (any thread)

    func streamOpened() {}  // ngtcp2 sends nothing for a stream until it carries data

    func processSoon() { scheduleProcess() }

    /// Hands the bytes to ngtcp2's stream buffer at once; the writer waits while the stream holds more than
    /// `maximumSendBuffer` unacknowledged bytes.
    func acceptWrite(
        stream: Int64, _ bytes: [UInt8], fin: Bool, _ continuation: CheckedContinuation<Void, any Error>
    ) {
        do {
            try core.write(stream: stream, bytes, fin: fin)
        } catch {
            continuation.resume(throwing: error)
            return
        }
        scheduleProcess()
        if core.bufferedBytes(stream: stream) > maximumSendBuffer {
            sinks.waitToWrite(stream, continuation)
        } else {
            continuation.resume()
        }
    }

    func sendDatagram(_ payload: [UInt8], deadline: UInt64) throws(TransportError) {
        if loop.inEventLoop {
            // A relay forwarding from the loop: no job hop; the packets go out at the end of the turn.
            _ = try outbound.offer(payload, deadline: deadline, wake: false)
            scheduleProcess()
        } else if try outbound.offer(payload, deadline: deadline, wake: true) {
            loop.execute { [self] in
                outbound.woken()
                scheduleProcess()
            }
        }
    }

    func setDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) async {
        _ = try? await loop.submit { [self] in
            sinks.datagramHandler = handler
            // Early datagrams delivered at once arrive before the application could install its handler (it gets
            // the connection in the same loop turn): hand the ones still unread to the handler, so a relay
            // forwards a woken talker's first frames as soon as it took the connection.
            if !isClient && !holdEarlyDatagrams && !core.isHandshakeCompleted {
                for datagram in sinks.datagrams.takeAll() { handler(datagram) }
            }
        }
    }

    func updateKeys() async throws {
        try await loop.submit { [self] in
            try core.initiateKeyUpdate(now: MonotonicClock.now())
            process()  // the next packets carry the new key phase
        }
    }

    func statistics() async -> ConnectionStatistics {
        (try? await loop.submit { [self] in
            let stats = core.statistics
            let dropped = sinks.datagramsDropped
            var statistics = ConnectionStatistics(
                latestRTT: Duration(nanoseconds: stats.latestRTT),
                smoothedRTT: Duration(nanoseconds: stats.smoothedRTT),
                minimumRTT: Duration(nanoseconds: stats.minRTT), congestionWindow: stats.congestionWindow,
                bytesInFlight: stats.bytesInFlight, packetsSent: stats.counters.packetsSent,
                packetsReceived: stats.counters.packetsReceived, bytesSent: stats.counters.bytesSent,
                bytesReceived: stats.counters.bytesReceived, datagramsSent: stats.counters.datagramsSent,
                datagramsAcknowledged: stats.counters.datagramsAcknowledged,
                datagramsLost: stats.counters.datagramsLost, datagramsExpired: stats.datagramsExpired,
                datagramsReceived: stats.counters.datagramsReceived, datagramsDropped: dropped,
                datagramsRejected: stats.counters.datagramsRejected, localAddress: local.description,
                migrations: stats.counters.migrations, keyUpdates: stats.counters.keyUpdates)
            statistics.quicVersion = QUICVersion(wireValue: stats.negotiatedVersion)
            return statistics
        }) ?? ConnectionStatistics()
    }
}
