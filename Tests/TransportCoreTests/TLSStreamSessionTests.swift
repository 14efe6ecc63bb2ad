import Testing

@testable import TransportCore

/// TLS 1.3 over a byte stream, in memory: a client and a server session exchange ciphertext directly.
@Suite("TLS over a byte stream (sans-IO)")
struct TLSStreamSessionTests {
    /// Shuttles ciphertext both ways until neither side has anything to say; returns each side's events.
    final class Pair {
        let client: TLSStreamSession
        let server: TLSStreamSession
        var clientEvents: [TLSStreamEvent] = []
        var serverEvents: [TLSStreamEvent] = []
        var flights = 0

        init(client: TLSStreamSession, server: TLSStreamSession) {
            self.client = client
            self.server = server
        }

        /// One flight from each side in turn; `throws` the first side's failure.
        func run(maxFlights: Int = 12) throws {
            for _ in 0..<maxFlights {
                clientEvents += try client.advance()
                let toServer = client.takeCiphertext()
                if !toServer.isEmpty { flights += 1 }
                toServer.withUnsafeBytes { server.receive($0) }
                serverEvents += try server.advance()
                let toClient = server.takeCiphertext()
                if !toClient.isEmpty { flights += 1 }
                toClient.withUnsafeBytes { client.receive($0) }
                if toServer.isEmpty && toClient.isEmpty { return }
            }
        }
    }

    static func serverContext(
        ticketKey: [UInt8]? = nil,
        cert: String = TestCertificates.serverCert,
        key: String = TestCertificates.serverKey
    ) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(cert), privateKey: TestCertificates.pem(key),
            ticketKey: ticketKey ?? [UInt8](repeating: 7, count: 64))
    }

    static func pair(
        server: TLSServerContext, serverName: String = "localhost", ca: String = TestCertificates.ca,
        clientALPN: String = "ptt/1-qx01", serverALPN: String = "ptt/1-qx01", ticket: [UInt8]? = nil
    ) throws -> Pair {
        Pair(
            client: try TLSStreamSession(
                client: TLSClientContext(trust: .certificates(TestCertificates.pem(ca))), serverName: serverName,
                alpn: clientALPN, ticket: ticket),
            server: try TLSStreamSession(server: server, alpn: serverALPN))
    }

    static func plaintext(_ events: [TLSStreamEvent]) -> [UInt8] {
        var bytes: [UInt8] = []
        for case .plaintext(let chunk) in events { bytes += chunk }
        return bytes
    }

    static func ticket(_ events: [TLSStreamEvent]) -> [UInt8]? {
        var last: [UInt8]?
        for case .sessionTicket(let bytes) in events { last = bytes }
        return last
    }

    /// The client offers one key share (X25519): a server with X25519 answers it directly; a server that allows
    /// P-256 only asks for it in a HelloRetryRequest, which costs one more flight each way, and still connects.
    @Test func oneKeyShareAndAHelloRetryRequestForAServerWithoutX25519() throws {
        let direct = try Self.pair(server: Self.serverContext())
        try direct.run()
        let p256Only =
            "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:-GROUP-ALL:+GROUP-SECP256R1:"
            + "%DISABLE_TLS13_COMPAT_MODE"
        let retried = try Self.pair(
            server: TLSServerContext(
                certificateChain: TestCertificates.pem(TestCertificates.serverCert),
                privateKey: TestCertificates.pem(TestCertificates.serverKey),
                ticketKey: [UInt8](repeating: 7, count: 64), priority: p256Only))
        try retried.run()
        #expect(direct.client.isHandshakeComplete && direct.server.isHandshakeComplete)
        #expect(retried.client.isHandshakeComplete && retried.server.isHandshakeComplete)
        #expect(retried.flights == direct.flights + 2)
        try retried.client.send(Array("join".utf8))
        try retried.run()
        #expect(Self.plaintext(retried.serverEvents) == Array("join".utf8))
    }

    @Test func handshakeExchangesDataBothWaysAndDeliversATicket() throws {
        let pair = try Self.pair(server: Self.serverContext())
        try pair.run()
        #expect(pair.client.isHandshakeComplete && pair.server.isHandshakeComplete)
        #expect(pair.clientEvents.contains(.handshakeCompleted))
        #expect(pair.serverEvents.contains(.handshakeCompleted))
        #expect(!pair.client.isResumed)
        let large = (0..<100_000).map { UInt8(truncatingIfNeeded: $0) }
        try pair.client.send(large)
        try pair.server.send(Array("pong".utf8))
        try pair.run()
        #expect(Self.plaintext(pair.serverEvents) == large)
        #expect(Self.plaintext(pair.clientEvents) == Array("pong".utf8))
        #expect(Self.ticket(pair.clientEvents) != nil, "TLS 1.3 servers send a NewSessionTicket after the handshake")
        pair.client.close()
        try pair.run()
        #expect(pair.serverEvents.last == .closeNotify)
    }

    @Test func ticketResumesWithTheSameKeyAndGoesColdWithAnother() throws {
        let key = [UInt8](repeating: 1, count: 64)
        let first = try Self.pair(server: Self.serverContext(ticketKey: key))
        try first.run()
        let ticket = try #require(Self.ticket(first.clientEvents))

        // Another relay instance sharing the ticket key resumes the session.
        let second = try Self.pair(server: Self.serverContext(ticketKey: key), ticket: ticket)
        try second.run()
        #expect(second.client.isResumed && second.server.isResumed)
        try second.client.send(Array("join 7".utf8))
        try second.run()
        #expect(Self.plaintext(second.serverEvents) == Array("join 7".utf8))

        // A server with another key cannot open the ticket: a full handshake, never a failure.
        let third = try Self.pair(
            server: Self.serverContext(ticketKey: [UInt8](repeating: 2, count: 64)),
            ticket: ticket)
        try third.run()
        #expect(third.client.isHandshakeComplete && !third.client.isResumed)
    }

    @Test func corruptTicketMeansAFullHandshake() throws {
        let pair = try Self.pair(server: Self.serverContext(), ticket: [UInt8](repeating: 0xAB, count: 300))
        try pair.run()
        #expect(pair.client.isHandshakeComplete && !pair.client.isResumed)
    }

    @Test(arguments: [
        ("localhost", TestCertificates.otherCA, TransportError.Code.certificateUntrusted),
        ("relay.invalid", TestCertificates.ca, .certificateNameMismatch),
    ])
    func certificateFailuresAreFinalAndPrecise(serverName: String, ca: String, code: TransportError.Code) throws {
        let pair = try Self.pair(server: Self.serverContext(), serverName: serverName, ca: ca)
        #expect { try pair.run() } throws: { ($0 as? TransportError)?.code == code }
        #expect { try pair.client.send([1]) } throws: { ($0 as? TransportError)?.code == code }
    }

    @Test func expiredCertificateIsRefused() throws {
        let server = try Self.serverContext(cert: TestCertificates.expiredCert, key: TestCertificates.expiredKey)
        let pair = try Self.pair(server: server)
        #expect { try pair.run() } throws: { ($0 as? TransportError)?.code == .certificateExpired }
    }

    @Test func alpnMismatchFailsTheHandshake() throws {
        let pair = try Self.pair(server: Self.serverContext(), clientALPN: "ptt/1-qx01", serverALPN: "other/1")
        #expect { try pair.run() } throws: { ($0 as? TransportError)?.code == .alpnMismatch }
    }

    @Test(arguments: [
        Array("GET / HTTP/1.1\r\nHost: relay\r\n\r\n".utf8),
        [0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0xFF],  // a ClientHello of one byte
        [0x17, 0x03, 0x03, 0x00, 0x10] + [UInt8](repeating: 0xAA, count: 16),  // application data first
    ])
    func garbageIsATypedErrorAndTheNextSessionIsServed(garbage: [UInt8]) throws {
        let context = try Self.serverContext()
        let server = try TLSStreamSession(server: context, alpn: "ptt/1-qx01")
        garbage.withUnsafeBytes { server.receive($0) }
        #expect { _ = try server.advance() } throws: { $0 is TransportError }
        let next = try Self.pair(server: context)
        try next.run()
        #expect(next.server.isHandshakeComplete)
    }
}
