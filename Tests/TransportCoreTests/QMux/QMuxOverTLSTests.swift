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

        init(
            ticket: [UInt8]? = nil, serverName: String = "localhost", ca: String = TestCertificates.ca,
            serverALPN: String = "ptt/1", ticketKey: [UInt8] = [UInt8](repeating: 3, count: 64),
            serverContext: TLSServerContext? = nil, remembered: [UInt8] = [], early: [UInt8] = []
        ) throws {
            var parameters = QUICParameters()
            parameters.alpn = "ptt/1"
            client = try QMuxOverTLS(
                client: TLSClientContext(trust: .certificates(TestCertificates.pem(ca))), serverName: serverName,
                parameters: parameters, ticket: ticket, now: now,
                rememberedParameters: remembered, earlyStreamBytes: early)
            var serverParameters = parameters
            serverParameters.alpn = serverALPN
            server = try QMuxOverTLS(
                server: serverContext ?? Self.serverContext(ticketKey: ticketKey),
                parameters: serverParameters, now: now)
        }

        /// A server context; with `earlyData` it accepts 0-RTT (anti-replay window of an hour).
        static func serverContext(
            ticketKey: [UInt8] = [UInt8](repeating: 3, count: 64),
            earlyData: Bool = false
        ) throws -> TLSServerContext {
            try TLSServerContext(
                certificateChain: TestCertificates.pem(TestCertificates.serverCert),
                privateKey: TestCertificates.pem(TestCertificates.serverKey), ticketKey: ticketKey,
                earlyDataWindow: earlyData ? 3_600_000 : nil)
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
        let second = try Pair(ticket: ticket)
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

    /// A first connection to a 0-RTT-capable server: the ticket and the server's parameters to remember.
    static func resumptionMaterial(_ context: TLSServerContext) throws -> (ticket: [UInt8], parameters: [UInt8]) {
        let first = try Pair(serverContext: context)
        first.run()
        var ticket: [UInt8]?
        for case .sessionTicket(let bytes) in first.clientEvents { ticket = bytes }
        return (try #require(ticket), first.client.encodedPeerTransportParameters)
    }

    static func earlyChunks(_ events: [QUICEvent]) -> [(bytes: [UInt8], isEarly: Bool)] {
        var chunks: [(bytes: [UInt8], isEarly: Bool)] = []
        for case .streamData(0, let bytes, _, let isEarly) in events { chunks.append((bytes, isEarly)) }
        return chunks
    }

    @Test func zeroRTTIsAcceptedAndDeliveredOnceFlaggedEarly() throws {
        let context = try Pair.serverContext(earlyData: true)
        let (ticket, parameters) = try Self.resumptionMaterial(context)
        #expect(!parameters.isEmpty)
        let pair = try Pair(
            ticket: ticket, serverContext: context, remembered: parameters,
            early: Array("join 7".utf8))
        #expect(pair.client.earlyStreamID == 0, "the early stream was opened under the remembered limits")
        pair.run()
        #expect(pair.client.isReady && pair.client.isResumed)
        #expect(pair.client.earlyDataAccepted == true)
        let chunks = Self.earlyChunks(pair.serverEvents)
        #expect(chunks.map(\.bytes).joined().elementsEqual(Array("join 7".utf8)))
        #expect(!chunks.contains { !$0.isEarly }, "0-RTT bytes carry isEarly")
        try pair.server.write(stream: 0, Array("burst".utf8), fin: false)
        pair.run()
        #expect(Self.streamBytes(pair.clientEvents, 0) == Array("burst".utf8))
    }

    @Test func rejectedZeroRTTIsResentOnTheSameStreamExactlyOnce() throws {
        let key = [UInt8](repeating: 9, count: 64)
        let (ticket, parameters) = try Self.resumptionMaterial(try Pair.serverContext(ticketKey: key, earlyData: true))
        // Same ticket key (TLS resumes) but no anti-replay store: the early data is refused.
        let pair = try Pair(
            ticket: ticket, serverContext: try Pair.serverContext(ticketKey: key),
            remembered: parameters, early: Array("join 7".utf8))
        #expect(pair.client.earlyStreamID == 0)
        pair.run()
        #expect(pair.client.isReady && pair.client.isResumed)
        #expect(pair.client.earlyDataAccepted == false)
        #expect(pair.clientEvents.contains { if case .earlyDataRejected = $0 { true } else { false } })
        let chunks = Self.earlyChunks(pair.serverEvents)
        #expect(chunks.map(\.bytes).joined().elementsEqual(Array("join 7".utf8)), "delivered exactly once")
        #expect(!chunks.contains { $0.isEarly })
        try pair.server.write(stream: 0, Array("burst".utf8), fin: false)
        pair.run()
        #expect(Self.streamBytes(pair.clientEvents, 0) == Array("burst".utf8))
    }

    @Test func replayedFirstFlightNeverDeliversEarlyDataTwice() throws {
        let context = try Pair.serverContext(earlyData: true)
        let (ticket, parameters) = try Self.resumptionMaterial(context)
        let pair = try Pair(
            ticket: ticket, serverContext: context, remembered: parameters,
            early: Array("join 7".utf8))
        let firstFlight = pair.client.takeCiphertext(now: pair.now)
        var deliveries = 0
        for _ in 0..<5 {
            let server = try QMuxOverTLS(server: context, parameters: QUICParameters(), now: pair.now)
            firstFlight.withUnsafeBytes { server.receive($0, now: pair.now) }
            _ = server.takeCiphertext(now: pair.now)
            while let event = server.nextEvent() {
                if case .streamData = event { deliveries += 1 }
                if case .handshakeCompleted = event { Issue.record("a replayed flight completed a handshake") }
            }
        }
        #expect(deliveries == 0, "early data is only delivered once the handshake completes, which a replay cannot")
        #expect((context.antiReplayStore?.counters.duplicates ?? 0) >= 4, "the anti-replay store refused the copies")
    }

    @Test func unreadableRememberedParametersFallBackTo1RTT() throws {
        let context = try Pair.serverContext(earlyData: true)
        let (ticket, _) = try Self.resumptionMaterial(context)
        var generator = SplitMix64(seed: 11)
        let garbage =
            [[0xff], [0x01, 0x09, 0x01]]
            + (0..<20).map { _ in
                (0..<Int.random(in: 1...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator)
                }
            }
        for remembered in garbage {
            let pair = try Pair(
                ticket: ticket, serverContext: context, remembered: remembered,
                early: Array("join 7".utf8))
            pair.run()
            #expect(pair.client.isReady && pair.client.isResumed, "a bad saved state costs 0-RTT, never the connection")
            if pair.client.earlyStreamID == nil { #expect(pair.client.earlyDataAccepted == nil) }
        }
    }

    @Test func serverReducingARememberedLimitIsAProtocolViolation() throws {
        let context = try Pair.serverContext(earlyData: true)
        let (ticket, _) = try Self.resumptionMaterial(context)
        var inflated = QMuxOverTLS.localParameters(QUICParameters())
        inflated.initialMaxData *= 4
        let pair = try Pair(
            ticket: ticket, serverContext: context, remembered: inflated.encode(),
            early: Array("join 7".utf8))
        pair.run()
        #expect(pair.client.closeReason?.error.code == .protocolViolation)
    }
}
