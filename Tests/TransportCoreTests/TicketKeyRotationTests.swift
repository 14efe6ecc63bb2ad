import Testing

@testable import TransportCore

/// Ticket-key rotation with overlap (`TicketKeySelection`): tickets of the retired key keep resuming while it is
/// configured as the previous key, over TLS on TCP (the same context hook serves QUIC sessions).
@Suite("Ticket-key rotation")
struct TicketKeyRotationTests {
    typealias Pair = QMuxOverTLSTests.Pair
    static let oldKey = [UInt8](repeating: 0x11, count: 64)
    static let newKey = [UInt8](repeating: 0x22, count: 64)

    static func context(
        current: [UInt8], previous: [UInt8]? = nil, earlyData: Bool = false
    ) throws
        -> TLSServerContext
    {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey),
            ticketKey: current, earlyDataWindow: earlyData ? 3_600_000 : nil,
            previousTicketKey: previous)
    }

    @Test func ticketsOfThePreviousKeyResumeAndOthersGoFull() throws {
        let (ticket, _) = try QMuxOverTLSTests.resumptionMaterial(try Self.context(current: Self.oldKey))

        let overlapping = try Pair(
            ticket: ticket,
            serverContext: try Self.context(
                current: Self.newKey,
                previous: Self.oldKey))
        overlapping.run()
        #expect(overlapping.client.isReady && overlapping.client.isResumed, "the old key's ticket resumes")

        let rotated = try Pair(ticket: ticket, serverContext: try Self.context(current: Self.newKey))
        rotated.run()
        #expect(rotated.client.isReady, "an unknown ticket costs a full handshake, never a failure")
        #expect(!rotated.client.isResumed)

        let current = try Pair(
            ticket: try QMuxOverTLSTests.resumptionMaterial(
                try Self.context(current: Self.newKey)
            ).ticket,
            serverContext: try Self.context(current: Self.newKey, previous: Self.oldKey))
        current.run()
        #expect(current.client.isReady && current.client.isResumed, "tickets of the current key are unaffected")
    }

    /// A fleet mid-rotation: instance B already runs with the new key (old one as previous); instance A, not yet
    /// rotated, issues a ticket. At B it resumes (1-RTT: a ticket carries 0-RTT only where it was issued), and the
    /// ticket B issues on that connection, sealed with the previous key too, carries the client's next 0-RTT there.
    /// (GnuTLS refuses 0-RTT for tickets issued before the accepting server started, so B is started first.)
    @Test func zeroRTTWithAPreviousKeyTicketIsAccepted() throws {
        let rotated = try Self.context(current: Self.newKey, previous: Self.oldKey, earlyData: true)
        let (ticket, parameters) = try QMuxOverTLSTests.resumptionMaterial(
            try Self.context(current: Self.oldKey, earlyData: true))
        let atB = try Pair(ticket: ticket, serverContext: rotated, remembered: parameters, early: Array("join 7".utf8))
        atB.run()
        #expect(atB.client.isResumed, "the old key's ticket resumes at B")
        #expect(atB.client.earlyDataAccepted == false, "B never issued it: no 0-RTT")
        var issuedByB: [UInt8]?
        for case .sessionTicket(let bytes) in atB.clientEvents { issuedByB = bytes }
        let pair = try Pair(
            ticket: issuedByB, serverContext: rotated,
            remembered: atB.client.encodedPeerTransportParameters, early: Array("join 7".utf8))
        pair.run()
        #expect(pair.client.isResumed)
        #expect(pair.client.earlyDataAccepted == true)
    }

    @Test func keyNamesFollowGnuTLSPeriods() {
        Self.oldKey.withUnsafeBytes { key in
            let period: UInt64 = 1_790_000_000 / TicketKeySelection.rotationPeriod
            let names = TicketKeySelection.acceptedNames(masterKey: key, unixTime: 1_790_000_000)
            #expect(names.count == 2 && names.allSatisfy { $0.count == 16 })
            #expect(names[0] == TicketKeySelection.derivedName(masterKey: key, period: period))
            #expect(names[1] == TicketKeySelection.derivedName(masterKey: key, period: period - 1))
            #expect(names[0] != names[1])
        }
    }

    @Test func malformedClientHellosYieldNoIdentity() {
        var generator = SplitMix64(seed: 7)
        for length in [0, 1, 34, 35, 40, 100, 600] {
            for _ in 0..<200 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                _ = bytes.withUnsafeBytes { TicketKeySelection.firstPSKIdentityPrefix(clientHello: $0) }
            }
        }
        // A minimal well-formed body with a pre_shared_key extension.
        var body = [UInt8](repeating: 0, count: 34) + [0] + [0, 2, 0x13, 0x01] + [1, 0]
        let identity = [UInt8](0..<20)
        let psk = [0, UInt8(2 + identity.count + 4), 0, UInt8(identity.count)] + identity + [0, 0, 0, 0]
        let extensions = [0, 41, 0, UInt8(psk.count)] + psk
        body += [0, UInt8(extensions.count)] + extensions
        #expect(
            body.withUnsafeBytes { TicketKeySelection.firstPSKIdentityPrefix(clientHello: $0) }
                == Array(identity.prefix(16)))
    }
}
