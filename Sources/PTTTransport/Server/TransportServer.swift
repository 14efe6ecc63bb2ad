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
    /// Connections whose handshake completed, in order.
    public let connections: IncomingConnections
    let loop: EventLoop
    let quic: LoopBound<QUICServerDriver?>
    private let connectionSink: AsyncStream<TransportConnection>.Continuation
    private let stopped = Locked(false)

    private init(loop: EventLoop, quicAddress: String?, connections: AsyncStream<TransportConnection>,
                 sink: AsyncStream<TransportConnection>.Continuation) {
        self.loop = loop
        self.quicAddress = quicAddress
        self.connections = IncomingConnections(base: connections)
        self.connectionSink = sink
        self.quic = LoopBound(nil, loop: loop)
    }

    /// Binds the configured sockets, loads the certificate and key, and starts accepting.
    ///
    /// - Throws: `invalidConfiguration` (bad address, unreadable certificate or key, bad ticket key file),
    ///   `systemCallFailed` (e.g. address in use).
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
        guard let quicText = configuration.quic else {
            throw TransportError(.invalidConfiguration, "no listening address configured")
        }
        guard let address = SocketAddress(parsing: quicText) else {
            throw TransportError(.invalidConfiguration,
                "cannot parse the listening address \(quicText); use HOST:PORT with a numeric host")
        }
        let (ticketKey, secrets) = try configuration.loadSecrets()
        let (stream, sink) = AsyncStream.makeStream(of: TransportConnection.self)
        let socket = try await loop.submit { UnsafeTransfer(try UDPSocket(bindingTo: address)) }
        let server = TransportServer(loop: loop, quicAddress: socket.value.localAddress.description,
                                     connections: stream, sink: sink)
        let transfer = socket
        do {
            try await loop.submit { [server] in
                let tls = try TLSServerContext(
                    certificateChainFile: configuration.certificateChain, privateKeyFile: configuration.privateKey,
                    ticketKey: ticketKey, earlyDataWindow: configuration.earlyData.windowMilliseconds,
                    antiReplayCapacity: configuration.earlyData.antiReplayCapacity)
                var limits = QUICServerEndpoint.Limits()
                limits.maxConnections = configuration.maxConnections
                limits.retryAboveConnections = configuration.retryAboveConnections
                let endpoint = try QUICServerEndpoint(
                    parameters: configuration.quicParameters, tls: tls, secrets: secrets,
                    requireRetry: configuration.requireRetry, limits: limits)
                server.quic.value = try QUICServerDriver(
                    loop: loop, socket: transfer.value, endpoint: endpoint, configuration: configuration
                ) { connection in sink.yield(connection) }
            }
        } catch {
            _ = try? await loop.submit { transfer.value.close() }
            throw error
        }
        return server
    }

    /// Live QUIC connections (including those still in the handshake or closing period).
    public func connectionCount() async -> Int {
        (try? await loop.submit { [self] in quic.value?.connectionCount ?? 0 }) ?? 0
    }

    /// Closes every connection with `code`, stops listening and ends `connections`.
    public func shutdown(code: UInt64 = 0) async {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        _ = try? await loop.submit { [self] in quic.value?.shutdown(code: code) }
        // Let the CONNECTION_CLOSE packets leave before the loop stops.
        try? await Task.sleep(for: .milliseconds(20))
        _ = try? await loop.submit { [self] in
            quic.value?.closeSocket()
            quic.value = nil
        }
        connectionSink.finish()
        loop.shutdown()
    }

    deinit {
        let alreadyStopped = stopped.withLock { $0 }
        if !alreadyStopped {
            let quic = self.quic
            loop.execute {
                quic.value?.shutdown(code: 0)
                quic.value?.closeSocket()
                quic.value = nil
            }
            connectionSink.finish()
            loop.shutdown()
        }
    }
}
