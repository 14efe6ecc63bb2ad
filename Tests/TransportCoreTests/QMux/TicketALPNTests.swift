import Testing

@testable import TransportCore

/// RFC 8446 §4.2.10: a server must refuse early data when the ALPN it selects differs from the one of the session
/// the ticket resumes (issue 21, item 15). GnuTLS 3.7.9 keeps no ALPN in its tickets and does not check it, so a
/// QMux session seals and opens tickets with a key derived from the server's ticket key and its own ALPN: a ticket
/// issued under another ALPN (a QUIC ticket, or another QMux protocol) costs a full handshake there, never 0-RTT.
@Suite("Session tickets are bound to their ALPN over TCP")
struct TicketALPNTests {
    typealias Pair = QMuxOverTLSTests.Pair

    /// A QUIC ticket (ALPN ptt/1) from `context`.
    static func quicTicket(_ context: TLSServerContext) throws -> [UInt8] {
        let net = try VirtualNetwork(tls: context)
        return try ZeroRTTTests.firstConnection(net).ticket
    }

    @Test func aQUICTicketNeverCarriesEarlyDataOverTCP() throws {
        let context = try Pair.serverContext(earlyData: true)
        let ticket = try Self.quicTicket(context)
        let (_, parameters) = try QMuxOverTLSTests.resumptionMaterial(context)
        let pair = try Pair(
            ticket: ticket, serverContext: context, remembered: parameters, early: Array("join 7".utf8))
        #expect(pair.client.earlyStreamID == 0, "the client offered 0-RTT with the QUIC ticket")
        pair.run()
        #expect(pair.client.isReady)
        #expect(pair.client.earlyDataAccepted == false, "early data accepted under another ALPN")
        #expect(!pair.server.acceptedEarlyData)
        #expect(!pair.client.isResumed, "a ticket of another ALPN does not open here: a full handshake")
        let chunks = QMuxOverTLSTests.earlyChunks(pair.serverEvents)
        #expect(chunks.map(\.bytes).joined().elementsEqual(Array("join 7".utf8)), "delivered once, in 1-RTT")
        #expect(!chunks.contains { $0.isEarly })
    }

    @Test func aTicketOfAnotherQMuxProtocolNeverCarriesEarlyData() throws {
        let context = try Pair.serverContext(earlyData: true)
        // A first connection under other/1-qx01 (client and server), which issues the ticket.
        var parameters = QUICParameters()
        parameters.alpn = "other/1"
        let issuing = try QMuxOverTLS(
            client: TLSClientContext(trust: .certificates(TestCertificates.pem(TestCertificates.ca))),
            serverName: "localhost",
            parameters: parameters, ticket: nil, now: 1)
        let server = try QMuxOverTLS(server: context, parameters: parameters, now: 1)
        var ticket: [UInt8]?
        for _ in 0..<8 {
            issuing.takeCiphertext(now: 1).withUnsafeBytes { server.receive($0, now: 1) }
            server.takeCiphertext(now: 1).withUnsafeBytes { issuing.receive($0, now: 1) }
            while let event = issuing.nextEvent() { if case .sessionTicket(let bytes) = event { ticket = bytes } }
        }
        let issued: [UInt8] = try #require(ticket, "the other protocol's connection issued no ticket")
        let (_, remembered) = try QMuxOverTLSTests.resumptionMaterial(context)
        let pair = try Pair(
            ticket: issued, serverContext: context, remembered: remembered, early: Array("join 7".utf8))
        pair.run()
        #expect(pair.client.isReady)
        #expect(pair.client.earlyDataAccepted == false)
        #expect(!pair.client.isResumed)
    }

    @Test func aTicketOfTheSameALPNStillResumesWithZeroRTT() throws {
        let context = try Pair.serverContext(earlyData: true)
        let (ticket, parameters) = try QMuxOverTLSTests.resumptionMaterial(context)
        let pair = try Pair(
            ticket: ticket, serverContext: context, remembered: parameters, early: Array("join 7".utf8))
        pair.run()
        #expect(pair.client.isResumed && pair.client.earlyDataAccepted == true)
    }
}
