import TransportCore
import TransportIO

/// Joins one sans-IO `QMuxOverTLS` connection to its event loop and TCP socket, and to the public API's async
/// sequences. Audio over TCP cannot be dropped once written, so datagrams wait in a bounded queue, expired ones
/// are dropped before writing, and none is written while the socket's unsent queue is above `maximumUnsent`.
final class QMuxConnectionDriver: ConnectionEventHandling, @unchecked Sendable {
    // @unchecked Sendable invariant: every stored `var` is touched only on `loop`'s thread; other threads read
    // `let`s, use the locked `outbound`/`resumption`, or hop with `loop.execute`.
    let loop: EventLoop
    let core: QMuxOverTLS
    let socket: TCPSocket
    let timerID: Int
    let sinks: ConnectionSinks
    /// The client's refreshed resumption states (`sinks.resumptionStates`, kept here for reads off the loop).
    let resumptionStates: ValueBroadcast<ResumptionState>
    let outbound: DatagramQueue
    /// Stream bytes the core holds for the whole connection (all streams) while they wait for the peer's
    /// flow-control credit, at most. A write past it waits, its bytes still the writer's, until credit lets queued
    /// bytes out: a peer that grants no credit pins this much of the relay's memory, not a buffer per stream.
    static let maximumQueuedStreamBytes = 256 * 1024
    /// Writes waiting for room under `maximumQueuedStreamBytes`, in the order they were made (all streams).
    var waitingWrites: [WaitingWrite] = []
    /// Datagrams are held back while the kernel holds more unacknowledged bytes than this.
    let maximumUnsent: Int
    /// Ciphertext waiting for the socket beyond which no more is taken from the core (see `process`).
    static let maximumPendingWrite = 256 * 1024
    /// After the connection ended, how long its last bytes (CONNECTION_CLOSE, close_notify, a TLS alert) may wait
    /// for a peer that does not read before the socket is reset anyway: a closed connection never holds its
    /// descriptor longer than this.
    static let closeLinger: UInt64 = 2_000_000_000
    private var connected: Bool
    var pendingWrite: [UInt8] = []
    var watchingWritable = false
    private var tornDown = false
    /// The connection ended with bytes still unwritten; the close-linger timer is armed.
    private var lingering = false

    /// Called once when the connection is ready (TLS + peer parameters), or with the error when it fails first.
    var onHandshakeResult: ((Result<Void, TransportError>) -> Void)?
    /// Called once when the socket is closed (server: forget the connection).
    var onFinished: (() -> Void)?
    /// Client: what the next connection will need.
    var tracker: ResumptionTracker?
    private var pendingEarlyMessages: [EarlyMessage] = []

    struct WaitingWrite {
        let stream: Int64
        var bytes: ArraySlice<UInt8>
        let fin: Bool
        let continuation: CheckedContinuation<Void, any Error>
    }

    let resumption = ResumptionRecord()

    init(
        loop: EventLoop, core: QMuxOverTLS, socket: TCPSocket, connected: Bool, datagramReceiveBuffer: Int,
        datagramSendBuffer: Int, maximumUnsent: Int = 16 * 1024
    ) {
        precondition(loop.inEventLoop)
        self.loop = loop
        self.core = core
        self.socket = socket
        self.connected = connected
        self.timerID = loop.makeTimerID()
        self.maximumUnsent = maximumUnsent
        sinks = ConnectionSinks(datagramReceiveBuffer: datagramReceiveBuffer)
        resumptionStates = sinks.resumptionStates
        sinks.remoteAddresses.publish(socket.remoteAddress.description)
        outbound = DatagramQueue(capacity: datagramSendBuffer)
    }

    /// Registers the socket with the loop and starts (client: once the TCP connect completes).
    func start() throws(TransportError) {
        watchingWritable = !connected
        try loop.register(fd: socket.fd, events: EventLoop.readable | (connected ? 0 : EventLoop.writable)) {
            [self] events in socketEvent(events)
        }
        process()
    }

    // MARK: - Loop side

    private func socketEvent(_ events: UInt32) {
        if !connected {
            guard events & (EventLoop.writable | EventLoop.readable) != 0 || events != 0 else { return }
            if let error = socket.connectionError() {
                core.transportEnded(now: MonotonicClock.now(), error: error)
                process()
                return
            }
            connected = true
        }
        if events & EventLoop.readable != 0 || events & ~(EventLoop.writable) != 0 { readAvailable() }
        process()
    }

    /// Reads up to 64 buffers' worth, handing each to the core, which consumes it before the next read (TLS
    /// keeps at most a partial record; a peer past its pre-handshake budget fails the core). Stops once the core
    /// ended: nothing more is read from a connection being closed.
    private func readAvailable() {
        loop.withScratchBuffer { buffer in
            for _ in 0..<64 where core.closeReason == nil {
                do throws(TransportError) {
                    guard let count = try socket.read(into: buffer) else { return }
                    if count == 0 {
                        core.transportEnded(now: MonotonicClock.now())
                        return
                    }
                    core.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]), now: MonotonicClock.now())
                } catch {
                    core.transportEnded(now: MonotonicClock.now(), error: error)
                    return
                }
            }
        }
    }

    /// Drains events, writes what is ready, re-arms the timer; closes the socket once the connection ended.
    func process() {
        guard !tornDown else { return }
        sinks.activity.heard(at: core.lastFrameRead)
        drainEvents()
        admitWaitingWrites()
        if connected {
            // More ciphertext only while little waits for the socket: the rest stays in the core, whose
            // connection-wide limit (`maximumQueuedStreamBytes`) then holds writers back. A peer that advertises
            // large credit and never reads cannot make the relay buffer without bound.
            while pendingWrite.count < Self.maximumPendingWrite || core.closeReason != nil {
                let ciphertext = core.takeCiphertext(now: MonotonicClock.now())
                if ciphertext.isEmpty { break }
                pendingWrite += ciphertext
                if core.closeReason != nil { break }
                admitWaitingWrites()  // framing made room in the core
            }
            flushSocket()
        }
        if core.closeReason != nil {
            if pendingWrite.isEmpty || !connected {
                tearDown()
            } else if !lingering {
                lingering = true
                loop.schedule(timer: timerID, at: MonotonicClock.now() &+ Self.closeLinger) { [self] in
                    socket.resetOnClose()
                    tearDown()
                }
            }
            return
        }
        if let deadline = core.nextTimeout {
            loop.schedule(timer: timerID, at: deadline) { [self] in
                core.handleTimeout(now: MonotonicClock.now())
                process()
            }
        } else {
            loop.cancelTimer(timerID)
        }
    }

    func handleTransportEvent(_ event: QUICEvent) {
        switch event {
        case .streamData(let id, let bytes, let fin, let isEarly):
            sinks.data(id, bytes, fin: fin, isEarly: isEarly)
        case .datagram(let bytes, let isEarly):
            sinks.deliver(Datagram(payload: bytes, isEarly: isEarly))
        default:
            break
        }
    }

    func handshakeDidComplete() {}

    func connectionWillFinish(_ reason: CloseReason) { failWaitingWrites(reason.error) }

    /// Server: drops a connection still in its handshake at once, with a reset and no TLS alert (it is being
    /// evicted to make room, or refused). Its sinks end with `error`; `onFinished` runs.
    func abort(_ error: TransportError) {
        guard !tornDown else { return }
        core.transportEnded(now: MonotonicClock.now(), error: error)
        drainEvents()
        socket.resetOnClose()
        tearDown()
    }

    private func tearDown() {
        guard !tornDown else { return }
        tornDown = true
        loop.cancelTimer(timerID)
        loop.unregister(fd: socket.fd)
        socket.close()
        onFinished?()
        onFinished = nil
    }

    // MARK: - Client

    /// The early messages: the replay-safe prefix already went as 0-RTT on `core.earlyStreamID` when the core
    /// attempted it; the rest (or all, without 0-RTT) go on that stream once the connection is ready.
    func startEarlyMessages(_ messages: [EarlyMessage]) {
        guard let id = core.earlyStreamID else {
            pendingEarlyMessages = messages
            return
        }
        openEarlyStream(id)
        pendingEarlyMessages = Array(messages.drop { $0.replaySafe })
    }

    func clientHandshakeCompleted() {
        clientSawResumption()
        _ = sendPendingEarlyMessages(pendingEarlyMessages, earlyStreamID: core.earlyStreamID)
        pendingEarlyMessages.removeAll()
        tracker?.transportParameters = core.encodedPeerTransportParameters
        let rtt = socket.kernelInfo.smoothedRTT
        if rtt > 0 { tracker?.smoothedRTT = rtt }
        refreshResumptionState()
    }

    func measureForResumption() {}  // the kernel's RTT, read once the connection is ready

    // MARK: - ConnectionBackend (any thread)

    func streamOpened() { process() }

    func processSoon() { process() }

    func sendDatagram(_ payload: [UInt8], deadline: UInt64) throws(TransportError) {
        if try outbound.offer(payload, deadline: deadline, wake: true) {
            loop.execute { [self] in drainPendingDatagrams() }
        }
    }

    /// Drops what expired, holds back (drops, counted) while TCP's unsent queue is long, frames the rest.
    private func drainPendingDatagrams() {
        var heldBack = 0
        for entry in outbound.takeFresh(now: MonotonicClock.now()) {
            if pendingWrite.count + socket.unsentBytes > maximumUnsent {
                heldBack += 1
            } else {
                try? core.sendDatagram(entry.payload)
            }
        }
        if heldBack > 0 { outbound.countDropped(heldBack) }
        process()
    }

    func setDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) async {
        _ = try? await loop.submit { [self] in sinks.datagramHandler = handler }
    }

    func migrate(to local: SocketAddress) async throws -> String {
        throw TransportError(
            .migrationUnsupported,
            "this connection runs over TCP (QMux), whose path is bound to one TCP connection and cannot migrate; "
                + "reconnect from the new network instead")
    }

    func updateKeys() async throws {
        throw TransportError(
            .keyUpdateUnsupported,
            "this connection runs over TCP (QMux over TLS), which has no QUIC key phases to update")
    }

    func statistics() async -> ConnectionStatistics {
        (try? await loop.submit { [self] in
            let kernel = socket.kernelInfo
            var statistics = ConnectionStatistics(
                smoothedRTT: .nanoseconds(kernel.smoothedRTT), bytesSent: core.bytesSent,
                bytesReceived: core.bytesReceived, datagramsSent: core.datagramsSent,
                datagramsExpired: outbound.expired, datagramsReceived: core.datagramsReceived,
                datagramsDropped: sinks.datagramsDropped)
            statistics.usedTCPFastOpen = core.isClient && kernel.fastOpenUsed
            return statistics
        }) ?? ConnectionStatistics()
    }
}
