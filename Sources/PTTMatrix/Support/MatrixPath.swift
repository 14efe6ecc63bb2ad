import ChildProcesses
import Foundation
import Glibc
import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// One case's emulated path: the network (its own namespaces and delay line), an event loop on each side, and
/// the commands that start peers in a namespace. Shut it down when the case ends.
final class MatrixPath: Sendable {
    let network: EmulatedNetwork
    let clientLoop: EventLoop
    let serverLoop: EventLoop
    let ipv6: Bool

    init(oneWayMilliseconds: Double, loss: Double = 0, seed: UInt64, ipv6: Bool = false) throws {
        network = try EmulatedNetwork.create(
            rttMilliseconds: 2 * oneWayMilliseconds, loss: loss, seed: seed, ipv6: ipv6)
        do {
            clientLoop = try network.withNamespace(.client) { try EventLoop(name: "matrix-client") }
            serverLoop = try network.withNamespace(.server) { try EventLoop(name: "matrix-relay") }
        } catch {
            network.close()
            throw error
        }
        self.ipv6 = ipv6
    }

    /// The server's address on this path.
    var serverHost: String { ipv6 ? EmulatedNetwork.serverAddress6 : EmulatedNetwork.serverAddress }

    /// `executable arguments` run inside `side`'s namespace.
    func command(_ side: EmulatedNetwork.Side, _ executable: String, _ arguments: [String]) -> (String, [String]) {
        let ip = access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip"
        let namespace = side == .client ? network.clientNamespace : network.serverNamespace
        return (ip, ["netns", "exec", namespace, executable] + arguments)
    }

    func shutdown() {
        clientLoop.shutdown()
        serverLoop.shutdown()
        network.close()
    }
}

/// What our relay saw: datagrams and control messages that reached it, and handshakes it completed.
final class RelayTally: Sendable {
    private let counts = Locked((datagrams: 0, messages: 0, handshakes: 0, pathChanges: 0))

    var datagrams: Int { counts.withLock { $0.datagrams } }
    var messages: Int { counts.withLock { $0.messages } }
    var handshakes: Int { counts.withLock { $0.handshakes } }
    var pathChanges: Int { counts.withLock { $0.pathChanges } }

    func record(_ event: RelayEvent) {
        counts.withLock { counts in
            switch event {
            case .datagram: counts.datagrams += 1
            case .message: counts.messages += 1
            case .handshakeCompleted: counts.handshakes += 1
            case .pathChanged: counts.pathChanges += 1
            case .closed, .streamRefused: break
            }
        }
    }
}

/// Our relay (`EchoRelay`, as `ptt-transport serve` runs it) on the server side of a path.
struct OurRelay {
    let server: TransportServer
    let address: ServerAddress
    let tally: RelayTally
    let task: Task<Void, Never>

    static func start(
        on path: MatrixPath, options: MatrixOptions, tcp: Bool = false, udp: Bool = true,
        adjust: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> OurRelay {
        let host = path.ipv6 ? "[\(path.serverHost)]" : path.serverHost
        // With TCP, the same port for both; the namespace is the case's own, so 4433 is free.
        let (server, address) = try await bind(
            loop: path.serverLoop, host: host, port: tcp ? 4433 : 0, options: options, tcp: tcp, udp: udp,
            adjust: adjust)
        let tally = RelayTally()
        let task = Task { await EchoRelay.run(server) { tally.record($0) } }
        return OurRelay(server: server, address: address, tally: tally, task: task)
    }

    /// Our relay's server as `ptt-transport serve` configures it, on `loop` at `host:port` (QUIC and/or TCP), with
    /// no per-source limits and no Retry (one client host plays every phone here).
    static func bind(
        loop: EventLoop, host: String, port: Int, options: MatrixOptions, tcp: Bool, udp: Bool,
        adjust: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> (TransportServer, ServerAddress) {
        var configuration = ServerConfiguration(
            quic: udp ? "\(host):0" : nil, certificateChain: options.certificate, privateKey: options.privateKey,
            earlyData: .enabled())
        configuration.perSourceLimits = nil
        configuration.retryAboveConnections = nil
        adjust(&configuration)
        if tcp {
            configuration.tcp = "\(host):\(port)"
            configuration.quic = udp ? "\(host):\(port)" : nil
        }
        let server = try await TransportServer.bind(configuration: configuration, loop: loop)
        guard let address = server.quicAddress ?? server.tcpAddress else {
            await server.shutdown()
            throw MatrixError("the relay reported no usable address")
        }
        return (server, address)
    }

    func stop() async {
        await server.shutdown()
        task.cancel()
    }
}
