import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Right after `networkChanged()`, the link never hands out the connection it is about to close: `nextReady()`
/// returns the replacement and `link.request` is answered on it, 20 times in a row, over QUIC and TCP (issue 33:
/// 18 of 20 returned the old one, and 17–18 requests failed with "connection closed by this side").
@Suite("TransportLink after a network change", .integration)
struct LinkNetworkChangeTests {
    @Test(arguments: [TransportPath.quic, .tcp])
    func nextReadyAfterANetworkChangeIsTheReplacement(path: TransportPath) async throws {
        let server = try await Fixtures.bindOnStablePort(LinkDataPathTests.configuration())
        let relay = Task { await EchoRelay.run(server) }
        let address = try #require(path == .tcp ? server.tcpAddress : server.quicAddress)
        let link = LinkDataPathTests.link(path, address)
        var previous = try await withTimeout { try await link.nextReady() }
        for round in 0..<20 {
            link.networkChanged()
            #expect(link.connection.map { $0 !== previous } ?? true, "the closing connection is not current")
            let next = try await withTimeout { try await link.nextReady() }
            #expect(next !== previous, "round \(round): the replacement, not the connection being closed")
            let question = Array("round \(round)".utf8)
            #expect(try await withTimeout { try await link.request(question) } == question)
            previous = next
        }
        link.stop()
        relay.cancel()
        await server.shutdown()
    }
}
