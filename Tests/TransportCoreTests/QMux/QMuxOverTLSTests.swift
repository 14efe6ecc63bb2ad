import Testing
@testable import TransportCore

/// QMux over TLS 1.3, both ends in memory: the whole TCP-fallback protocol stack without sockets.
@Suite("QMux over TLS (sans-IO)")
struct QMuxOverTLSTests {
    final class Pair {
        let client: QMuxOverTLS
        let server: QMuxOverTLS
        var clientEvents: [QUICEvent] = []
        var serverEvents: [QUICEvent] = []
        /// Flights that carried bytes, both directions: a measure of round trips.
        var flights: [(toServer: Bool, bytes: Int)] = []
        let now: UInt64 = 1_000_000_000

        init(ticket: [UInt8]? = nil, serverName: String = "localhost", ca: String = TestCertificates.ca,
             serverALPN: String = "ptt/1", ticketKey: [UInt8] = [UInt8](repeating: 3, count: 64)) throws {
            var parameters = QUICParameters()
            parameters.alpn = "ptt/1"
            client = try QMuxOverTLS(client: TLSClientContext(trust: .caFile(ca)), serverName: serverName,
                                     parameters: parameters, ticket: ticket, now: now)
            var serverParameters = parameters
            serverParameters.alpn = serverALPN
            server = try QMuxOverTLS(
                server: TLSServerContext(certificateChainFile: TestCertificates.serverCert,
                                         privateKeyFile: TestCertificates.serverKey, ticketKey: ticketKey),
                parameters: serverParameters, now: now)
        }

        func run(maxFlights: Int = 16) {
            for _ in 0..<maxFlights {
                let toServer = client.takeCiphertext(now: now)
                if !toServer.isEmpty { flights.append((true, toServer.count)) }
                toServer.withUnsafeBytes { server.receive($0, now: now) }
                while let event = server.nextEvent() { serverEvents.append(event) }
                let toClient = server.takeCiphertext(now: now)
                if !toClient.isEmpty { flights.append((false, toClient.count)) }
                toClient.withUnsafeBytes { client.receive($0, now: now) }
                while let event = client.nextEvent() { clientEvents.append(event) }
                if toServer.isEmpty && toClient.isEmpty { return }
            }
        }
    }

    static func streamBytes(_ events: [QUICEvent], _ id: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        for case .streamData(let stream, let chunk, _, _) in events where stream == id { bytes += chunk }
        return bytes
    }

    @Test func coldConnectionIsReadyAfterOneRoundTripAndCarriesStreamsAndDatagrams() throws {
        let pair = try Pair()
        pair.run(maxFlights: 1)
        // Client: ClientHello; server: its flight with QX_TRANSPORT_PARAMETERS (early start); the client is ready.
        #expect(pair.client.isReady, "the server's parameters ride with its Finished")
        let id = try #require(try pair.client.openBidirectionalStream())
        try pair.client.write(stream: id, Array("join 7".utf8), fin: false)
        try pair.client.sendDatagram([1, 2, 3])
        pair.run()
        #expect(pair.server.isReady)
        #expect(Self.streamBytes(pair.serverEvents, id) == Array("join 7".utf8))
        #expect(pair.serverEvents.contains { if case .datagram([1, 2, 3], _) = $0 { true } else { false } })
        try pair.server.write(stream: id, Array("ok".utf8), fin: true)
        pair.run()
        #expect(Self.streamBytes(pair.clientEvents, id) == Array("ok".utf8))
        pair.client.close(code: 7, reason: "bye", now: pair.now)
        pair.run()
        guard case .closed(let reason)? = pair.serverEvents.last else {
            Issue.record("the server saw no close")
            return
        }
        #expect(reason == .peer(code: 7, reason: "bye"))
    }

    @Test func ticketResumes() throws {
        let first = try Pair()
        first.run()
        var ticket: [UInt8]?
        for case .sessionTicket(let bytes) in first.clientEvents { ticket = bytes }
        let second = try Pair(ticket: try #require(ticket))
        second.run()
        #expect(second.client.isReady && second.client.isResumed)
    }

    @Test func wrongNameAndALPNAreFinalErrors() throws {
        let wrongName = try Pair(serverName: "relay.invalid")
        wrongName.run()
        #expect(wrongName.client.closeReason?.error.code == .certificateNameMismatch)
        let wrongALPN = try Pair(serverALPN: "other")
        wrongALPN.run()
        #expect(wrongALPN.client.closeReason?.error.code == .alpnMismatch)
        #expect(wrongALPN.server.closeReason?.error.code == .alpnMismatch)
    }
}
