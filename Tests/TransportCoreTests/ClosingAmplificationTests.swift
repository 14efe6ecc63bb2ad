import Testing

@testable import TransportCore

/// A connection refused during its handshake sits in its closing period and repeats its CONNECTION_CLOSE for
/// packets that arrive (RFC 9000 §10.2.1). Its peer never proved its address, so the repeats stay within three
/// times what arrives (§8.1), however small the packets that carry the connection ID.
@Suite("Closing period: no amplification toward an unproven address (sans-IO)")
struct ClosingAmplificationTests {
    @Test func tinyPacketsDrawCloseRepeatsWithinThreeTimesTheirSize() throws {
        let net = try VirtualNetwork()
        var parameters = QUICParameters()
        parameters.alpn = "other/9"  // the server refuses: no_application_protocol
        try net.addClient(parameters: parameters)
        net.run(for: 200 * nanosecondsPerMillisecond)
        let server = try #require(net.serverConnections.first)
        #expect(server.closeReason != nil && !server.isHandshakeCompleted)
        let closeSize = try #require(server.closingPacket?.count)

        // The smallest packet the endpoint routes to it: a short header carrying the client's original DCID.
        let initial = try #require(net.firstFlight(client: 0).first)
        let dcid = Array(initial[6..<(6 + Int(initial[5]))])
        let poke: [UInt8] = [0x40] + dcid
        #expect(3 * poke.count < closeSize, "each poke alone does not pay for a close")
        let before = net.sentCount.toClient
        let pokes = 300
        for _ in 0..<pokes {
            net.inject(poke, fromClient: 0)
            net.run(for: nanosecondsPerMillisecond)
        }
        let repeats = net.sentCount.toClient - before
        #expect(repeats * closeSize <= 3 * pokes * poke.count, "\(repeats) closes of \(closeSize) bytes")
        #expect(repeats >= (3 * pokes * poke.count) / closeSize - 1, "the close is still repeated as earned")
    }
}
