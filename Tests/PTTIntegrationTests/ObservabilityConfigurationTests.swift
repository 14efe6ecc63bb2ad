import Foundation
import PTTTransport
import TestSupport
import Testing

/// Bad key log, qlog and initial RTT settings are refused with `invalidConfiguration`, before any traffic.
@Suite("Observability and initial RTT settings", .integration)
struct ObservabilityConfigurationTests {
    static let missing = "/nonexistent-\(UUID())"

    @Test(arguments: [Duration.zero, .milliseconds(-5), .seconds(3600)])
    func clientRefusesAnOutOfRangeInitialRTT(initialRTT: Duration) async throws {
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        configuration.initialRTT = initialRTT
        let error = await #expect(throws: TransportError.self) {
            _ = try await TransportClient(configuration: configuration).connect(
                to: ServerAddress(host: "127.0.0.1", port: 9))
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("initial RTT") == true)
    }

    @Test(arguments: [Duration.zero, .milliseconds(-5), .seconds(3600)])
    func serverRefusesAnOutOfRangeInitialRTT(initialRTT: Duration) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.initialRTT = initialRTT
        let error = await #expect(throws: TransportError.self) {
            _ = try await TransportServer.bind(configuration: configuration)
        }
        #expect(error?.code == .invalidConfiguration)
    }

    @Test func aMissingQlogDirectoryIsRefusedOnBothSides() async throws {
        var server = Fixtures.serverConfiguration()
        server.qlogDirectory = Self.missing
        let bindError = await #expect(throws: TransportError.self) {
            _ = try await TransportServer.bind(configuration: server)
        }
        #expect(bindError?.code == .invalidConfiguration)
        #expect(bindError?.message.contains("qlog directory") == true)
        var client = ClientConfiguration(serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        client.qlogDirectory = Self.missing
        let connectError = await #expect(throws: TransportError.self) {
            _ = try await TransportClient(configuration: client).connect(to: ServerAddress(host: "127.0.0.1", port: 9))
        }
        #expect(connectError?.code == .invalidConfiguration)
    }

    @Test func anUnwritableKeyLogIsRefusedOnBothSides() async throws {
        var server = Fixtures.serverConfiguration()
        server.keyLogFile = "\(Self.missing)/keys"
        let bindError = await #expect(throws: TransportError.self) {
            _ = try await TransportServer.bind(configuration: server)
        }
        #expect(bindError?.code == .invalidConfiguration)
        #expect(bindError?.message.contains("key log") == true)
        var client = ClientConfiguration(serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .tcpOnly)
        client.keyLogFile = "\(Self.missing)/keys"
        let connectError = await #expect(throws: TransportError.self) {
            _ = try await TransportClient(configuration: client).connect(to: ServerAddress(host: "127.0.0.1", port: 9))
        }
        #expect(connectError?.code == .invalidConfiguration)
    }

    @Test func aKeyLogFileIsPrivateAndAppendedTo() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-keys-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("EXISTING LINE\n".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        configuration.keyLogFile = path
        let client = TransportClient(configuration: configuration)
        try await withTimeout {
            for _ in 0..<2 { try await client.connect(to: address).close() }
        }
        await server.shutdown()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == "EXISTING LINE")
        let secrets = lines.dropFirst().map { $0.split(separator: " ") }
        #expect(secrets.allSatisfy { $0.count == 3 && $0[1].count == 64 }, "LABEL <client random> <secret>")
        #expect(Set(secrets.map { $0[1] }).count == 2, "one client random per connection")
        #expect(secrets.filter { $0[0] == "CLIENT_TRAFFIC_SECRET_0" }.count == 2)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        let fresh = path + ".new"
        defer { try? FileManager.default.removeItem(atPath: fresh) }
        configuration.keyLogFile = fresh
        let (server2, address2, relay2) = try await Fixtures.echoServer()
        defer { relay2.cancel() }
        let freshClient = TransportClient(configuration: configuration)
        try await withTimeout { try await freshClient.connect(to: address2).close() }
        await server2.shutdown()
        let created = try FileManager.default.attributesOfItem(atPath: fresh)
        #expect((created[.posixPermissions] as? NSNumber)?.intValue == 0o600, "a new key log is created 0600")
    }
}
