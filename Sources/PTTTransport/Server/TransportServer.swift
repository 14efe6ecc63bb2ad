import TransportCore
import TransportIO

/// A relay's listening side: accepts QUIC connections (and QMux over TCP when configured), verifies ALPN, and
/// hands each connection to the application once its handshake completed.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: .init(
///     quic: "0.0.0.0:4433", certificateChain: "certs/server.pem", privateKey: "certs/server.key"))
/// for await connection in server.connections { ... }
/// ```
public final class TransportServer: Sendable {
    /// The bound QUIC address (the real port when bound to port 0).
    public let quicAddress: String?
    /// The bound TCP (QMux) address, when configured.
    public let tcpAddress: String?
    /// Connections whose handshake completed, in order.
    public let connections: IncomingConnections
    package let loop: EventLoop
    let quic: LoopBound<QUICServerDriver?>
    let tcp: LoopBound<QMuxServerDriver?>
    private let connectionMailbox: Mailbox<TransportConnection>
    private let stopped = Locked(false)

    private init(
        loop: EventLoop, quicAddress: String?, tcpAddress: String?,
        connections: Mailbox<TransportConnection>
    ) {
        self.loop = loop
        self.quicAddress = quicAddress
        self.tcpAddress = tcpAddress
        self.connections = IncomingConnections(base: connections)
        self.connectionMailbox = connections
        self.quic = LoopBound(nil, loop: loop)
        self.tcp = LoopBound(nil, loop: loop)
    }

    /// Binds the configured sockets, loads the certificate and key, and starts accepting.
    ///
    /// - Throws: `invalidConfiguration` (bad address, unreadable certificate or key, bad ticket key file, a limit
    ///   below 1), `systemCallFailed` (e.g. address in use, or the process is out of file descriptors so the event
    ///   loop or a socket cannot be created).
    public static func bind(configuration: ServerConfiguration) async throws -> TransportServer {
        let loop = try EventLoop(name: "ptt-server")
        do {
            return try await bind(configuration: configuration, loop: loop)
        } catch {
            loop.shutdown()
            throw error
        }
    }

    /// Binds on a given loop; its sockets are created on the loop's thread (and so in its network namespace).
    /// The server owns the loop from here on and stops it in `shutdown()`.
    package static func bind(configuration: ServerConfiguration, loop: EventLoop) async throws -> TransportServer {
        guard configuration.quic != nil || configuration.tcp != nil else {
            throw TransportError(.invalidConfiguration, "no listening address configured (neither QUIC nor TCP)")
        }
        guard configuration.maxPendingTCPHandshakes >= 1, configuration.maxPendingTCPHandshakesPerSource >= 1 else {
            throw TransportError(
                .invalidConfiguration,
                "maxPendingTCPHandshakes and maxPendingTCPHandshakesPerSource "
                    + "must be at least 1 (they are \(configuration.maxPendingTCPHandshakes) and "
                    + "\(configuration.maxPendingTCPHandshakesPerSource))")
        }
        let udpAddress = try configuration.quic.map(Self.parse)
        let tcpAddress = try configuration.tcp.map(Self.parse)
        let (ticketKey, previousTicketKey, secrets) = try configuration.loadSecrets()
        let accepted = Mailbox<TransportConnection>()
        let sockets = try await loop.submit { [tcpAddress] in
            // Port 0 on both, same address: the same port number for both, which the kernel chose for UDP and
            // which another program may hold for TCP; then try another port (a few times) rather than fail.
            let samePort = tcpAddress.map { $0.port == 0 && $0 == udpAddress } ?? false
            var attempt = 0
            while true {
                attempt += 1
                let udp = try udpAddress.map { address throws(TransportError) in try UDPSocket(bindingTo: address) }
                var tcpAddress = tcpAddress
                if samePort, let udp, let requested = tcpAddress {
                    tcpAddress = requested.with(port: udp.localAddress.port)
                }
                do {
                    let tcp = try tcpAddress.map { address throws(TransportError) in
                        try TCPListener(bindingTo: address)
                    }
                    return UnsafeTransfer((udp, tcp))
                } catch {
                    udp?.close()
                    if samePort && attempt < 20 { continue }
                    throw error
                }
            }
        }
        let server = TransportServer(
            loop: loop, quicAddress: sockets.value.0?.localAddress.description,
            tcpAddress: sockets.value.1?.localAddress.description,
            connections: accepted)
        do {
            try await loop.submit { [server] in
                let tls = try TLSServerContext(
                    certificateChainFile: configuration.certificateChain, privateKeyFile: configuration.privateKey,
                    ticketKey: ticketKey, earlyDataWindow: configuration.earlyData.windowMilliseconds,
                    antiReplayCapacity: configuration.earlyData.antiReplayCapacity,
                    previousTicketKey: previousTicketKey,
                    keyLogFile: configuration.keyLogFile)
                if let udp = sockets.value.0 {
                    let endpoint = try QUICServerEndpoint(
                        parameters: configuration.quicParameters, tls: tls, secrets: secrets,
                        requireRetry: configuration.requireRetry, limits: configuration.quicLimits)
                    server.quic.value = try QUICServerDriver(
                        loop: loop, socket: udp, endpoint: endpoint, configuration: configuration
                    ) { connection in accepted.send(connection) }
                }
                if let listener = sockets.value.1 {
                    server.tcp.value = try QMuxServerDriver(
                        loop: loop, listener: listener, tls: tls, configuration: configuration
                    ) { connection in accepted.send(connection) }
                }
            }
        } catch {
            _ = try? await loop.submit {
                sockets.value.0?.close()
                sockets.value.1?.close()
            }
            throw error
        }
        return server
    }

    private static func parse(_ text: String) throws(TransportError) -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw TransportError(
                .invalidConfiguration,
                "cannot parse the listening address \(text); use HOST:PORT with a numeric host")
        }
        return address
    }

    /// Live connections, QUIC and TCP (including those still in the handshake or QUIC's closing period).
    public func connectionCount() async -> Int {
        (try? await loop.submit { [self] in (quic.value?.connectionCount ?? 0) + (tcp.value?.connectionCount ?? 0) })
            ?? 0
    }

    /// The TCP listener's admission counters: pending handshakes, and connections refused or dropped to resist
    /// floods and descriptor exhaustion (all zero without a TCP listener).
    public func tcpAdmissionStatistics() async -> TCPAdmissionStatistics {
        (try? await loop.submit { [self] in tcp.value?.statistics ?? TCPAdmissionStatistics() })
            ?? TCPAdmissionStatistics()
    }

    /// Closes every connection with `code`, stops listening and ends `connections`.
    public func shutdown(code: UInt64 = 0) async {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        _ = try? await loop.submit { [self] in
            quic.value?.shutdown(code: code)
            tcp.value?.shutdown(code: code)
        }
        // Let the CONNECTION_CLOSE packets leave before the loop stops.
        try? await Task.sleep(for: .milliseconds(20))
        _ = try? await loop.submit { [self] in
            quic.value?.closeSocket()
            quic.value = nil
            tcp.value?.closeListener()
            tcp.value = nil
        }
        connectionMailbox.finish()
        loop.shutdown()
    }

    deinit {
        let alreadyStopped = stopped.withLock { $0 }
        if !alreadyStopped {
            let (quic, tcp) = (self.quic, self.tcp)
            loop.execute {
                quic.value?.shutdown(code: 0)
                quic.value?.closeSocket()
                quic.value = nil
                tcp.value?.shutdown(code: 0)
                tcp.value?.closeListener()
                tcp.value = nil
            }
            connectionMailbox.finish()
            loop.shutdown()
        }
    }
}
