import PTTTransport
import TestSupport
import Testing

/// One QUIC listener, two application protocols (a relay's phones and its trunks on one port): each connection
/// arrives on the stream of the protocol its client chose, whatever the early-data policy, and a bad list is
/// refused at bind.
@Suite("A server accepting additional ALPNs on its QUIC port", .integration)
struct AdditionalALPNServerTests {
    @Test(arguments: [true, false])
    func connectionsArriveOnTheStreamOfTheirProtocol(handsOutEarly: Bool) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.additionalALPNs = ["ptt-trunk/1"]
        configuration.earlyData = .enabled(deliverBeforeHandshake: handsOutEarly, deliverEarlyDatagrams: false)
        let server = try await TransportServer.bind(configuration: configuration)
        let address = try #require(server.quicAddress)
        let phone = try await Fixtures.client().connect(to: address)
        let trunk = try await Fixtures.client(alpn: "ptt-trunk/1").connect(to: address)
        try await withTimeout {
            var main = server.connections.makeAsyncIterator()
            var additional = server.additionalConnections.makeAsyncIterator()
            let (first, second) = (await main.next(), await additional.next())
            #expect(first?.remoteAddress == (await phone.statistics()).localAddress)
            #expect(second?.remoteAddress == (await trunk.statistics()).localAddress)
        }
        await #expect(throws: TransportError.self) {
            _ = try await Fixtures.client(alpn: "h3", handshakeTimeout: .seconds(3)).connect(to: address)
        }
        await phone.close()
        await trunk.close()
        await server.shutdown()
    }

    @Test func aBadListIsRefusedAtBind() async throws {
        for bad in [["ptt/1"], [""]] {
            var configuration = Fixtures.serverConfiguration()
            configuration.additionalALPNs = bad
            await #expect(throws: TransportError.self) {
                _ = try await TransportServer.bind(configuration: configuration)
            }
        }
    }
}
