import TransportCore
import TransportIO

/// QMux's side of a `ConnectionDriver`: reads a TCP socket into the QMux-over-TLS core and writes its TLS records
/// back (`+Output`). Audio over TCP cannot be dropped once written, so datagrams wait in the driver's bounded
/// queue, expired ones are dropped before framing, and none is framed while the socket's unsent queue is above
/// `maximumUnsent`.
final class TLSStreamPump: ConnectionPump, @unchecked Sendable {
    // @unchecked Sendable invariant: touched only on its driver's loop thread (the driver hops before calling).
    let loop: EventLoop
    let core: QMuxOverTLS
    let socket: TCPSocket
    /// How much of a connection's outgoing data the pump holds (a relay's: `TCPConnectionBudget`).
    struct SendLimits {
        /// Stream bytes the core holds for the whole connection (all streams) while they wait for the peer's
        /// flow-control credit, at most. A write past it waits, its bytes still the writer's, until credit lets
        /// queued bytes out: a peer that grants no credit pins this much, not a buffer per stream.
        let queuedStreamBytes: Int
        /// Stream data taken from the core as ciphertext and waiting for the socket, at most.
        let pendingCiphertext: Int

        /// A relay's accepted connections: `TCPConnectionBudget`.
        static let relay = SendLimits(
            queuedStreamBytes: TCPConnectionBudget.queuedStreamBytes,
            pendingCiphertext: TCPConnectionBudget.pendingCiphertext)
        /// A client's one connection to its relay: room for a burst (a write of a few messages returns at once).
        static let client = SendLimits(queuedStreamBytes: 256 * 1024, pendingCiphertext: 256 * 1024)
    }
    let limits: SendLimits
    /// Writes waiting for room under `limits.queuedStreamBytes`, in the order they were made (all streams).
    var waitingWrites: [WaitingWrite] = []
    /// Datagrams are held back while the kernel holds more unacknowledged bytes than this.
    let maximumUnsent: Int

    /// After the connection ended, how long its last bytes (CONNECTION_CLOSE, close_notify, a TLS alert) may wait
    /// for a peer that does not read before the socket is reset anyway: a closed connection never holds its
    /// descriptor longer than this.
    static let closeLinger: UInt64 = 2_000_000_000
    var connected: Bool
    var pendingWrite: [UInt8] = []
    var watchingWritable = false
    /// The connection ended with bytes still unwritten: when the socket is reset anyway.
    private var lingerDeadline: UInt64?
    /// The peer's side ended after the connection closed: the socket is no longer read.
    private(set) var readEnded = false

    struct WaitingWrite {
        let stream: Int64
        var bytes: ArraySlice<UInt8>
        let fin: Bool
        let continuation: CheckedContinuation<Void, any Error>
    }

    init(
        loop: EventLoop, core: QMuxOverTLS, socket: TCPSocket, connected: Bool, limits: SendLimits,
        maximumUnsent: Int = 16 * 1024
    ) {
        self.loop = loop
        self.limits = limits
        self.core = core
        self.socket = socket
        self.connected = connected
        self.maximumUnsent = maximumUnsent
    }

    /// Registers the socket with the loop and starts (client: once the TCP connect completes).
    func start(_ driver: QMuxConnectionDriver) throws(TransportError) {
        watchingWritable = !connected
        try loop.register(fd: socket.fd, events: EventLoop.readable | (connected ? 0 : EventLoop.writable)) {
            [self] events in socketEvent(events, driver)
        }
        driver.process()
    }

    // MARK: - Input

    private func socketEvent(_ events: UInt32, _ driver: QMuxConnectionDriver) {
        if !connected {
            guard events & (EventLoop.writable | EventLoop.readable) != 0 || events != 0 else { return }
            if let error = socket.connectionError() {
                core.transportEnded(now: MonotonicClock.now(), error: error)
                driver.process()
                return
            }
            connected = true
        }
        if readEnded && events & ~EventLoop.writable != 0 {
            // Hung up or failed while the closed connection lingers: its last bytes can never leave.
            return driver.tearDown(closingTimedOut: true)
        }
        if events & EventLoop.readable != 0 || events & ~(EventLoop.writable) != 0 { readAvailable() }
        if let claim = core.takeClaimToStart() { startClaim(claim, driver) }
        driver.process()
    }

    /// Server: the first flight is held while its ticket's claim is asked of the shared anti-replay store (see
    /// `QMuxOverTLS.claimAnswered`); the answer feeds it again, and the connection goes on.
    private func startClaim(_ claim: ZeroRTTClaim, _ driver: QMuxConnectionDriver) {
        guard let admission = core.zeroRTTAdmission else {
            return core.claimAnswered(claim, accepted: false, now: MonotonicClock.now())
        }
        admission.claim(claim.ticket) { [weak self, weak driver] accepted in
            guard let self else { return }
            core.claimAnswered(claim, accepted: accepted, now: MonotonicClock.now())
            driver?.process()
        }
    }

    /// Reads up to 64 buffers' worth, handing each to the core, which consumes it before the next read (TLS
    /// keeps at most a partial record; a peer past its pre-handshake budget fails the core). Once the core ended,
    /// what still arrives is read and dropped: while the closed connection lingers (`closeLinger`) the kernel's
    /// receive buffer holds none of it (`TCPConnectionBudget`), and the final close sends FIN, not a reset.
    private func readAvailable() {
        guard !readEnded else { return }
        loop.withScratchBuffer { buffer in
            for _ in 0..<64 {
                do throws(TransportError) {
                    guard let count = try socket.read(into: buffer) else { return }
                    if count == 0 { return peerEnded(nil) }
                    guard core.closeReason == nil else { continue }
                    core.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]), now: MonotonicClock.now())
                } catch {
                    return peerEnded(error)
                }
            }
        }
    }

    /// The peer's side ended (end of stream, or `error`): the core learns it; once the core has closed, the socket
    /// is no longer watched for reading (level-triggered, it would report the end again and again).
    private func peerEnded(_ error: TransportError?) {
        guard core.closeReason != nil else { return core.transportEnded(now: MonotonicClock.now(), error: error) }
        readEnded = true
        loop.modify(fd: socket.fd, events: watchingWritable ? EventLoop.writable : 0)
    }

    // MARK: - ConnectionPump

    func streamWritable(_ id: Int64, _ driver: QMuxConnectionDriver) {}  // writes wait in `waitingWrites` instead

    func pathValidated(_ address: SocketAddress, succeeded: Bool, _ driver: QMuxConnectionDriver) {}

    func connectionWillFinish(_ error: TransportError) { failWaitingWrites(error) }

    /// At once when every byte left (or the socket never connected); else once they did, or after `closeLinger`.
    func closingDeadline(now: UInt64) -> UInt64? {
        guard connected && !pendingWrite.isEmpty else { return nil }
        if lingerDeadline == nil { lingerDeadline = now &+ Self.closeLinger }
        return lingerDeadline
    }

    func release(closingTimedOut: Bool) {
        if closingTimedOut { socket.resetOnClose() }
        loop.unregister(fd: socket.fd)
        socket.close()
    }

    /// The kernel's RTT of the TCP connection, once it measured one.
    func measure(into tracker: inout ResumptionTracker) {
        let rtt = socket.kernelInfo.smoothedRTT
        if rtt > 0 { tracker.smoothedRTT = rtt }
    }

    func migrate(_ driver: QMuxConnectionDriver, to local: SocketAddress) async throws -> String {
        throw TransportError(
            .migrationUnsupported,
            "this connection runs over TCP (QMux), whose path is bound to one TCP connection and cannot migrate; "
                + "reconnect from the new network instead")
    }

    func updateKeys(_ driver: QMuxConnectionDriver) throws {
        throw TransportError(
            .keyUpdateUnsupported,
            "this connection runs over TCP (QMux over TLS), which has no QUIC key phases to update")
    }

    func statistics(_ driver: QMuxConnectionDriver) -> ConnectionStatistics {
        let kernel = socket.kernelInfo
        var statistics = ConnectionStatistics(
            smoothedRTT: .nanoseconds(kernel.smoothedRTT), bytesSent: core.bytesSent,
            bytesReceived: core.bytesReceived, datagramsSent: core.datagramsSent,
            datagramsExpired: driver.outbound.expired, datagramsReceived: core.datagramsReceived,
            datagramsDropped: driver.sinks.datagramsDropped, datagramsRejected: core.datagramsRejected)
        statistics.usedTCPFastOpen = core.isClient && kernel.fastOpenUsed
        return statistics
    }
}

extension ConnectionDriver where Pump == TLSStreamPump {
    /// Registers the socket and starts the handshake (client: once the TCP connect completes).
    func start() throws(TransportError) { try pump.start(self) }

    /// Server: drops a connection still in its handshake at once, with a reset and no TLS alert (it is being
    /// evicted to make room, or refused). Its sinks end with `error`; `onFinished` runs.
    func abort(_ error: TransportError) {
        guard !tornDown else { return }
        pump.core.transportEnded(now: MonotonicClock.now(), error: error)
        drainEvents()
        tearDown(closingTimedOut: true)
    }
}
