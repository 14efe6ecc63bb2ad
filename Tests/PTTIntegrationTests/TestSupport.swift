import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport

/// The test PKI in certs/ and helpers shared by the end-to-end tests.
enum Fixtures {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url.path
            }
        }
        return FileManager.default.currentDirectoryPath
    }()
    static let certs: String = ProcessInfo.processInfo.environment["PTT_TEST_CERTS"] ?? "\(root)/certs"
    static var ca: String { "\(certs)/ca.pem" }
    static var otherCA: String { "\(certs)/other-ca.pem" }
    static var serverCert: String { "\(certs)/server.pem" }
    static var serverKey: String { "\(certs)/server.key" }
    static var clientCert: String { "\(certs)/client.pem" }
    static var clientKey: String { "\(certs)/client.key" }
    static var expiredCert: String { "\(certs)/expired.pem" }
    static var expiredKey: String { "\(certs)/expired.key" }
    static var untrustedCert: String { "\(certs)/untrusted.pem" }
    static var untrustedKey: String { "\(certs)/untrusted.key" }

    static func serverConfiguration(
        listen: String = "127.0.0.1:0", cert: String = serverCert,
        key: String = serverKey, alpn: String = "ptt/1"
    ) -> ServerConfiguration {
        ServerConfiguration(quic: listen, certificateChain: cert, privateKey: key, alpn: alpn)
    }

    static func client(
        serverName: String = "localhost", ca: String = Fixtures.ca, alpn: String = "ptt/1",
        handshakeTimeout: Duration = .seconds(5)
    ) -> TransportClient {
        TransportClient(
            configuration: ClientConfiguration(
                serverName: serverName, alpn: alpn, trust: .caFile(ca), handshakeTimeout: handshakeTimeout))
    }

    /// An echo relay on TCP only (QMux over TLS), on a free port, and a client that connects over TCP only; cancel
    /// the task and shut the server down when done.
    static func tcpEchoServer(
        cert: String = serverCert, key: String = serverKey
    ) async throws -> (TransportServer, ServerAddress, Task<Void, Never>, TransportClient) {
        var configuration = serverConfiguration(cert: cert, key: key)
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .tcpOnly))
        return (server, server.tcpAddress!, relay, client)  // bound: the configuration asks for TCP
    }

    /// An echo relay on a free port; shut it down with `stop()`.
    static func echoServer(
        listen: String = "127.0.0.1:0", cert: String = serverCert, key: String = serverKey,
        alpn: String = "ptt/1"
    ) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        let server = try await TransportServer.bind(
            configuration: serverConfiguration(
                listen: listen, cert: cert, key: key, alpn: alpn))
        let relay = Task { await EchoRelay.run(server) }
        return (server, server.quicAddress!, relay)
    }
}

extension Fixtures {
    /// Binds on a `StablePort` (outside the kernel's ephemeral range), for tests that restart a relay on the same
    /// port: an ephemeral port could be handed to another test's socket between the two binds.
    static func bindOnStablePort(_ configuration: ServerConfiguration) async throws -> TransportServer {
        try await StablePort.first { port in
            var configuration = configuration
            configuration.quic = configuration.quic.map { _ in "127.0.0.1:\(port)" }
            configuration.tcp = configuration.tcp.map { _ in "127.0.0.1:\(port)" }
            return try await TransportServer.bind(configuration: configuration)
        }
    }
}

extension Fixtures {
    /// Binds a restarted relay on the port its predecessor just released, retrying for up to two seconds while
    /// the port is still held (another test's socket may take a just-released port for a moment).
    static func rebind(_ configuration: ServerConfiguration) async throws -> TransportServer {
        var lastError: (any Error)?
        for _ in 0..<100 {
            do {
                return try await TransportServer.bind(configuration: configuration)
            } catch let error as TransportError where error.message.contains("Address already in use") {
                lastError = error
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        throw lastError!
    }
}

/// Fails the awaiting test instead of hanging it.
func withTimeout<T: Sendable>(
    _ duration: Duration = .seconds(20), _ body: @escaping @Sendable () async throws -> T
)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: duration)
            throw CancellationError()
        }
        let result = try await group.next()!
        group.cancelAll()
        return result
    }
}
