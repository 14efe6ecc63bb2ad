import TransportCore
import TransportIO

/// QUIC's side of a `ConnectionDriver`: reads a client's connected socket into ngtcp2, writes ngtcp2's packets into
/// the loop's UDP send batch (`+Output`), and moves a client to a new local address (`+Migration`). A server's
/// connections share the server's socket and batch; the server's driver feeds their cores.
final class UDPPacketPump: ConnectionPump, @unchecked Sendable {
    // @unchecked Sendable invariant: touched only on its driver's loop thread (the driver hops before calling).
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
    /// A writer waits while its stream holds more unacknowledged bytes than this.
    let maximumSendBuffer: UInt64 = 1 << 20
    /// The send batch was full and the socket buffer too: writing resumes when it has room.
    var waitingForRoom = false
    /// Client: the migration validating its new path, and the socket a finished one left (see `+Migration`).
    var migration: PendingMigration?
    var retiredSocket: UDPSocket?
    var retiredSocketTimerID: Int?
    /// Client: called when the first packet from the server arrives (handshake progress, for racing TCP).
    var onFirstPacket: (() -> Void)?

    init(loop: EventLoop, core: QUICConnection, sender: UDPSendBatch, remote: SocketAddress, local: SocketAddress) {
        self.loop = loop
        self.core = core
        self.socket = sender.socket
        self.sender = sender
        self.remote = remote
        self.currentRemote = remote
        self.local = local
        self.isClient = core.isClient
    }

    // MARK: - Client input

    /// Client: reads everything waiting on the connected socket, and on the sockets of a migration's new path or
    /// the path it left (packets already in flight there still count).
    func socketReadable(_ driver: QUICConnectionDriver) {
        let error = receiveAll(from: socket)
        for other in [migration?.socket, retiredSocket].compactMap({ $0 }) { _ = receiveAll(from: other) }
        if let failure = error, !core.isHandshakeCompleted {
            // ICMP port/host unreachable before the handshake: the server is not there (or UDP is blocked).
            core.close(code: 0, reason: "", now: MonotonicClock.now())
            let unreachable = TransportError(
                failure.code, "the server at \(remote) is unreachable over UDP (\(failure.message))",
                libraryCode: failure.libraryCode)
            driver.reportHandshake(.failure(unreachable))
        }
        driver.process()
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

    // MARK: - ConnectionPump

    /// Hands the bytes to ngtcp2's stream buffer at once; the writer waits while the stream holds more than
    /// `maximumSendBuffer` unacknowledged bytes.
    func acceptWrite(
        _ driver: QUICConnectionDriver, stream: Int64, _ bytes: [UInt8], fin: Bool,
        _ continuation: CheckedContinuation<Void, any Error>
    ) {
        do {
            try core.write(stream: stream, bytes, fin: fin)
        } catch {
            continuation.resume(throwing: error)
            return
        }
        driver.processSoon()
        if core.bufferedBytes(stream: stream) > maximumSendBuffer {
            driver.sinks.waitToWrite(stream, continuation)
        } else {
            continuation.resume()
        }
    }

    func streamWritable(_ id: Int64, _ driver: QUICConnectionDriver) {
        if core.bufferedBytes(stream: id) <= maximumSendBuffer { driver.sinks.resumeWriters(id, error: nil) }
    }

    func pathValidated(_ address: SocketAddress, succeeded: Bool, _ driver: QUICConnectionDriver) {
        // Report a move only once the peer answered on the new path (an unanswered probe, e.g. a replayed packet
        // from another address, leaves the call where it was).
        if succeeded, !isClient, address == core.currentRemote, address != currentRemote {
            currentRemote = address
            driver.sinks.remoteAddresses.publish(address.description)
        }
        if isClient, let outcome = core.takeMigrationOutcome() { migrationDidFinish(outcome) }
    }

    func connectionWillFinish(_ error: TransportError) { abandonMigration(error) }

    /// A client stops at once; a server keeps answering with CONNECTION_CLOSE for 3 PTO.
    func closingDeadline(now: UInt64) -> UInt64? {
        isClient ? nil : now + max(core.closingPeriod, 1_000_000)
    }

    func release(closingTimedOut: Bool) {
        guard isClient else { return }  // a server's connections share its socket
        sender.flush()  // the CONNECTION_CLOSE queued this turn
        for client in [socket, migration?.socket, retiredSocket].compactMap({ $0 }) {
            loop.unregister(fd: client.fd)
            client.close()
        }
        retiredSocketTimerID.map(loop.cancelTimer)
    }

    func measure(into tracker: inout ResumptionTracker) {
        let statistics = core.statistics
        tracker.smoothedRTT = statistics.smoothedRTT
        tracker.quicVersion = statistics.negotiatedVersion
    }

    func updateKeys(_ driver: QUICConnectionDriver) throws {
        try core.initiateKeyUpdate(now: MonotonicClock.now())
        driver.process()  // the next packets carry the new key phase
    }

    func statistics(_ driver: QUICConnectionDriver) -> ConnectionStatistics {
        let stats = core.statistics
        var statistics = ConnectionStatistics(
            latestRTT: Duration(nanoseconds: stats.latestRTT),
            smoothedRTT: Duration(nanoseconds: stats.smoothedRTT),
            minimumRTT: Duration(nanoseconds: stats.minRTT), congestionWindow: stats.congestionWindow,
            bytesInFlight: stats.bytesInFlight, packetsSent: stats.counters.packetsSent,
            packetsReceived: stats.counters.packetsReceived, bytesSent: stats.counters.bytesSent,
            bytesReceived: stats.counters.bytesReceived, datagramsSent: stats.counters.datagramsSent,
            datagramsAcknowledged: stats.counters.datagramsAcknowledged,
            datagramsLost: stats.counters.datagramsLost, datagramsExpired: stats.datagramsExpired,
            datagramsReceived: stats.counters.datagramsReceived, datagramsDropped: driver.sinks.datagramsDropped,
            datagramsRejected: stats.counters.datagramsRejected, localAddress: local.description,
            migrations: stats.counters.migrations, keyUpdates: stats.counters.keyUpdates)
        statistics.quicVersion = QUICVersion(wireValue: stats.negotiatedVersion)
        return statistics
    }
}

extension ConnectionDriver where Pump == UDPPacketPump {
    /// Client: the connected socket (or a migration's) has packets.
    func socketReadable() { pump.socketReadable(self) }

    /// The local address the connection's packets leave from now.
    var local: SocketAddress { pump.local }
}
