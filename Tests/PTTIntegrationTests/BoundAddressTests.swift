import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// A server's bound addresses are `ServerAddress` values: the real port after binding port 0, a host a client
/// can connect to, and the same `host:port` text the CLI prints (IPv6 in brackets).
@Suite("TransportServer bound addresses", .integration)
struct BoundAddressTests {
    @Test(arguments: ["127.0.0.1", "::1"])
    func boundAddressesCarryTheRealPortAndPrintAsBefore(host: String) async throws {
        var configuration = Fixtures.serverConfiguration(listen: host.contains(":") ? "[\(host)]:0" : "\(host):0")
        configuration.tcp = configuration.quic
        let server = try await TransportServer.bind(configuration: configuration)  // port 0: both on one port
        let quic = try #require(server.quicAddress)
        let tcp = try #require(server.tcpAddress)
        #expect(quic.host == host && tcp.host == host)
        #expect(quic.port != 0 && tcp.port == quic.port)
        let text = host.contains(":") ? "[\(host)]:\(quic.port)" : "\(host):\(quic.port)"
        #expect(quic.description == text)
        #expect(ServerAddress(text) == quic)

        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let connection = try await withTimeout { try await Fixtures.client().connect(to: quic) }
        #expect(connection.status == .ready)
        await connection.close()
        await server.shutdown()
    }
}
