import TransportCore
import TransportIO

/// The loop side of a QUIC server: reads the shared UDP socket, lets the sans-IO endpoint route each packet,
/// and keeps one `QUICConnectionDriver` per live connection.
final class QUICServerDriver {
    let loop: EventLoop
    let socket: UDPSocket
    /// Every connection's packets (and the endpoint's replies) leave through this batch, once per loop turn.
    let sender: UDPSendBatch
    let endpoint: QUICServerEndpoint
    let configuration: ServerConfiguration
    private var drivers: [ObjectIdentifier: QUICConnectionDriver] = [:]
    private var scratch = [UInt8](repeating: 0, count: 65536)
    /// Called on the loop for every connection whose handshake completed.
    let accepted: (TransportConnection) -> Void

    init(
        loop: EventLoop, socket: UDPSocket, endpoint: QUICServerEndpoint, configuration: ServerConfiguration,
        accepted: @escaping (TransportConnection) -> Void
    ) throws(TransportError) {
        self.loop = loop
        self.socket = socket
        self.sender = try UDPSendBatch(socket: socket, loop: loop)
        self.endpoint = endpoint
        self.configuration = configuration
        self.accepted = accepted
        try loop.register(fd: socket.fd, events: EventLoop.readable) { [weak self] ready in
            if ready & EventLoop.writable != 0 { self?.sender.socketWritable() }
            if ready & ~EventLoop.writable != 0 { self?.readable() }
        }
    }

    var connectionCount: Int { drivers.count }

    private func readable() {
        scratch.withUnsafeMutableBytes { buffer in
            for _ in 0..<512 {
                let received: UDPSocket.Received
                do {
                    guard let next = try socket.receive(into: buffer) else { return }
                    received = next
                } catch {
                    continue  // an ICMP error for one peer must not stop the server
                }
                let packet = UnsafeRawBufferPointer(rebasing: buffer[..<received.length])
                let now = MonotonicClock.now()
                switch endpoint.receive(packet: packet, from: received.remote, to: received.local, now: now) {
                case .deliver(let core, let isNew):
                    let driver =
                        isNew
                        ? adopt(core, remote: received.remote, local: received.local)
                        : drivers[ObjectIdentifier(core)]
                    core.receive(
                        packet: packet, from: received.remote, to: received.local, ecn: received.ecn,
                        now: now)
                    driver?.scheduleProcess()
                case .reply(let bytes):
                    _ = bytes.withUnsafeBytes {  // a reply without room is answered again when the peer retransmits
                        sender.enqueue($0, to: received.remote, from: received.local, ecn: 0)
                    }
                case .drop:
                    break
                }
            }
        }
    }

    private func adopt(_ core: QUICConnection, remote: SocketAddress, local: SocketAddress) -> QUICConnectionDriver {
        let driver = QUICConnectionDriver(
            loop: loop, core: core, sender: sender, remote: remote, local: local,
            isClient: false,
            datagramReceiveBuffer: configuration.datagramReceiveBuffer)
        let key = ObjectIdentifier(core)
        drivers[key] = driver
        let maximumMessageSize = configuration.maximumMessageSize
        let connection = { [unowned driver] in
            TransportConnection(
                path: .quic, remoteAddress: remote.description, backend: driver,
                sinks: driver.sinks,
                maximumMessageSize: maximumMessageSize)
        }
        if configuration.earlyData.handsOutEarly {
            // 0.5-RTT: the application sees the connection (and early stream data) now; early datagrams wait
            // unless the policy delivers them too.
            driver.holdEarlyDatagrams = !configuration.earlyData.deliverEarlyDatagrams
            accepted(connection())
        } else {
            driver.onHandshakeResult = { [weak self] result in
                guard let self, case .success = result else { return }
                accepted(connection())
            }
        }
        // Weak: connection drivers may finish their closing period after the server driver is gone.
        // The core strongly (no cycle: it knows no driver); a weak reference would slow every retain of it.
        driver.onFinished = { [weak self, core] in
            guard let self else { return }
            endpoint.remove(core)
            drivers[key] = nil
        }
        return driver
    }

    /// Closes every connection (CONNECTION_CLOSE with `code`) and stops reading.
    func shutdown(code: UInt64) {
        for driver in drivers.values { driver.closeSoon(code: code, reason: "server shutting down") }
    }

    /// Stops reading and closes the socket (after `shutdown` let the CONNECTION_CLOSE packets out).
    func closeSocket() {
        sender.flush()
        loop.unregister(fd: socket.fd)
        socket.close()
        drivers.removeAll()
    }
}

extension ServerConfiguration {
    /// The endpoint's admission limits: the table size, Retry under load, and the per-source budget.
    var quicLimits: QUICServerEndpoint.Limits {
        var limits = QUICServerEndpoint.Limits()
        limits.maxConnections = maxConnections
        limits.retryAboveConnections = retryAboveConnections
        limits.perSource = perSourceLimits?.core
        return limits
    }
}

extension TransportServer {
    /// UDP payloads the QUIC endpoint dropped without a reply or a connection (empty, truncated, garbage,
    /// rate-limited), since the server started.
    package func droppedQUICPackets() async -> UInt64 {
        (try? await loop.submit { [self] in quic.value?.endpoint.droppedPackets ?? 0 }) ?? 0
    }
}
