import Testing

@testable import TransportCore

/// The 0-RTT anti-replay store against a stranger who fills it (issue 21, item 13): one ticket, then ClientHello
/// after ClientHello resuming it with early data, each with a fresh random and so a fresh binder, GnuTLS' own key.
/// Keyed by ticket, the store holds one entry for all of them (the ticket carries 0-RTT once), and a real client's
/// 0-RTT is still accepted; before, each attempt took an entry until the store refused everyone's 0-RTT.
@Suite("0-RTT anti-replay: one entry per ticket, not per ClientHello")
struct AntiReplayFillTests {
    typealias Pair = QMuxOverTLSTests.Pair

    static func context(capacity: Int) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChainFile: TestCertificates.serverCert, privateKeyFile: TestCertificates.serverKey,
            ticketKey: [UInt8](repeating: 5, count: 64), earlyDataWindow: 3_600_000, antiReplayCapacity: capacity)
    }

    @Test func oneTicketResumedOverAndOverOverTCPTakesOneEntry() throws {
        let context = try Self.context(capacity: 16)
        let (ticket, parameters) = try QMuxOverTLSTests.resumptionMaterial(context)
        let (realTicket, realParameters) = try QMuxOverTLSTests.resumptionMaterial(context)
        var accepted = 0
        for attempt in 0..<100 {
            let pair = try Pair(
                ticket: ticket, serverContext: context, remembered: parameters, early: Array("wake \(attempt)".utf8))
            pair.run()
            #expect(pair.client.isReady && pair.client.isResumed, "every attempt still resumes (1-RTT)")
            if pair.client.earlyDataAccepted == true { accepted += 1 }
        }
        #expect(accepted == 1, "the ticket carried 0-RTT \(accepted) times")
        #expect(context.antiReplayStore?.count == 1)
        #expect(context.antiReplayStore?.refusedFull == 0)

        let real = try Pair(
            ticket: realTicket, serverContext: context, remembered: realParameters, early: Array("wake".utf8))
        real.run()
        #expect(real.client.earlyDataAccepted == true, "a real client's 0-RTT was refused")
    }

    @Test func oneTicketResumedOverAndOverOverQUICTakesOneEntry() throws {
        let context = try Self.context(capacity: 8)
        let attackerNet = try VirtualNetwork(tls: context)
        let saved = try ZeroRTTTests.firstConnection(attackerNet)
        let realNet = try VirtualNetwork(tls: context)
        realNet.installEcho()
        let real = try ZeroRTTTests.firstConnection(realNet)
        for _ in 0..<30 {
            let client = try attackerNet.addClient(resumption: saved)
            let stream = try #require(try client.openBidirectionalStream())
            try client.write(stream: stream, [1], fin: true)
            attackerNet.run(for: 200 * nanosecondsPerMillisecond)
        }
        #expect(context.antiReplayStore?.count == 1)
        let client = try realNet.addClient(resumption: real)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("back on channel 7".utf8), fin: true)
        #expect(realNet.run { realNet.clientStreamData(stream, client: 1).fin })
        #expect(client.earlyDataAccepted == true, "a real client's 0-RTT was refused")
    }

    @Test func aClientHelloOfferingSeveralTicketsGetsNoEarlyData() throws {
        // RFC 8446 §4.2.10: early data only with the first identity; GnuTLS does not check which one it selected.
        let hello = Self.clientHelloBody(identities: [
            [UInt8](repeating: 1, count: 20), [UInt8](repeating: 2, count: 20),
        ])
        let identities = hello.withUnsafeBytes { TicketKeySelection.pskIdentities(clientHello: $0) }
        #expect(identities?.count == 2)
        let store = AntiReplayStore(capacity: 4)
        let antiReplay = try GnuTLSAntiReplay(windowMilliseconds: 1000, store: store)
        hello.withUnsafeBytes { antiReplay.clientHelloArrived($0) }
        #expect(!antiReplay.hasPresentedTicket, "two identities: nothing to record, so no 0-RTT")
        let single = Self.clientHelloBody(identities: [[UInt8](repeating: 1, count: 20)])
        single.withUnsafeBytes { antiReplay.clientHelloArrived($0) }
        #expect(antiReplay.hasPresentedTicket)
    }

    /// A minimal ClientHello body whose only extension is pre_shared_key with `identities`.
    static func clientHelloBody(identities: [[UInt8]]) -> [UInt8] {
        var list: [UInt8] = []
        for identity in identities { list += [0, UInt8(identity.count)] + identity + [0, 0, 0, 0] }
        let binders: [UInt8] = [0, 33, 32] + [UInt8](repeating: 0, count: 32)
        let psk = [UInt8(list.count >> 8), UInt8(list.count & 0xff)] + list + binders
        let extensions = [0, 41, UInt8(psk.count >> 8), UInt8(psk.count & 0xff)] + psk
        return [UInt8](repeating: 0, count: 34) + [0] + [0, 2, 0x13, 0x01] + [1, 0]
            + [UInt8(extensions.count >> 8), UInt8(extensions.count & 0xff)] + extensions
    }
}
