import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// Where the benchmark's relays and clients run: on loopback, or in two network namespaces joined by an
/// emulated path. Each side gets event loops whose threads live in its namespace, so every socket they open is
/// on the right side of the path.
final class BenchEnvironment: @unchecked Sendable {
    // @unchecked Sendable: all stored properties are immutable after init; loops are thread-safe.
    let serverHost: String
    let clientLoop: EventLoop
    let rttMilliseconds: Double?
    let network: EmulatedNetwork?
    private let makeServerLoop: @Sendable () throws -> EventLoop

    private init(
        serverHost: String, clientLoop: EventLoop, rttMilliseconds: Double?, network: EmulatedNetwork? = nil,
        makeServerLoop: @escaping @Sendable () throws -> EventLoop
    ) {
        self.serverHost = serverHost
        self.clientLoop = clientLoop
        self.rttMilliseconds = rttMilliseconds
        self.network = network
        self.makeServerLoop = makeServerLoop
    }

    /// Relay and clients in two namespaces joined by a delay line with `rtt` and `loss`. Loops are started inside
    /// the namespaces, so their threads (and sockets) stay there.
    static func emulated(rttMilliseconds: Double, loss: Double, tcpFastOpen: Bool) throws -> BenchEnvironment {
        let network = try EmulatedNetwork.create(
            rttMilliseconds: rttMilliseconds, loss: loss,
            serverTCPFastOpen: tcpFastOpen)
        let clientLoop = try network.withNamespace(.client) { try EventLoop(name: "bench-client") }
        return BenchEnvironment(
            serverHost: EmulatedNetwork.serverAddress, clientLoop: clientLoop,
            rttMilliseconds: rttMilliseconds, network: network
        ) {
            try network.withNamespace(.server) { try EventLoop(name: "bench-relay") }
        }
    }

    static func loopback() throws -> BenchEnvironment {
        BenchEnvironment(
            serverHost: "127.0.0.1", clientLoop: try EventLoop(name: "bench-client"),
            rttMilliseconds: nil
        ) { try EventLoop(name: "bench-relay") }
    }

    /// Which transports a benchmark relay offers.
    enum RelayPaths {
        /// QUIC on UDP only.
        case quic
        /// QMux on TCP only; UDP to the port gets ICMP port unreachable.
        case tcp
        /// QMux on TCP, and a socket on the same UDP port that reads nothing: UDP is silently dropped.
        case tcpWithUDPDropped
    }

    /// What a benchmark relay does with its connections.
    enum RelayBehaviour {
        /// `EchoRelay`: streams and datagrams go back to their sender.
        case echo
        /// Nothing: the scenario reads `server.connections` itself.
        case none
        /// `FanoutRelay`: every datagram goes to every other connection.
        case fanout(FanoutStatistics)
    }

    /// A relay for `configuration` listening on a free port of the server side (the same port number for TCP).
    func startRelay(
        _ configuration: ServerConfiguration, host: String? = nil, port: UInt16 = 0,
        behaviour: RelayBehaviour = .echo, paths: RelayPaths = .quic
    ) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = configuration
        let host = host ?? serverHost
        configuration.quic = paths == .quic ? "\(host):\(port)" : nil
        configuration.tcp = paths == .quic ? nil : "\(host):\(port)"
        // One client host plays every phone here, and the figures are for the transport, not for admission
        // control: no per-source budget, and no Retry under load (`requireRetry` still applies).
        configuration.perSourceLimits = nil
        configuration.retryAboveConnections = nil
        let server = try await TransportServer.bind(configuration: configuration, loop: try makeServerLoop())
        let address = (server.quicAddress ?? server.tcpAddress)!
        var blackHole: UDPSocket?
        if paths == .tcpWithUDPDropped {
            let bind = { try UDPSocket(bindingTo: SocketAddress(host: address.host, port: address.port)!) }
            blackHole = try network.map { try $0.withNamespace(.server, bind) } ?? bind()
        }
        let relay = Task { [blackHole] in
            switch behaviour {
            case .echo: await EchoRelay.run(server)
            case .fanout(let statistics): await FanoutRelay.run(server, statistics: statistics)
            case .none: break
            }
            withExtendedLifetime(blackHole) {}  // the black hole lives as long as the relay
        }
        return (server, address, relay)
    }

    /// Another event loop on the client side of the path (its own thread, in the client namespace when emulated),
    /// e.g. for listeners that must not share the talker's or the relay's loop. The caller shuts it down.
    func makeClientSideLoop(name: String) throws -> EventLoop {
        if let network { return try network.withNamespace(.client) { try EventLoop(name: name) } }
        return try EventLoop(name: name)
    }

    func client(_ configuration: ClientConfiguration) -> TransportClient {
        TransportClient(configuration: configuration, loop: clientLoop)
    }

    func shutdown() {
        clientLoop.shutdown()
        network?.close()
    }
}
