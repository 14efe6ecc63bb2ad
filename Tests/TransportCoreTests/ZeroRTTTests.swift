import Testing

@testable import TransportCore

/// Resumption and 0-RTT on a virtual clock.
@Suite("Fast wake: resumption and 0-RTT (sans-IO)")
struct ZeroRTTTests {
    static let ticketKey = (0..<64).map { UInt8($0) }

    static func serverTLS(earlyData: Bool = true) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey), ticketKey: ticketKey,
            earlyDataWindow: earlyData ? 3_600_000 : nil)
    }

    /// A first connection that runs long enough to receive its ticket and token.
    static func firstConnection(_ net: VirtualNetwork) throws -> ClientResumption {
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 200 * nanosecondsPerMillisecond)
        let saved = try #require(net.resumption())
        #expect(!saved.transportParameters.isEmpty)
        #expect(!saved.token.isEmpty, "the server sends NEW_TOKEN after the handshake")
        net.client.close(code: 0, reason: "", now: net.now)
        net.run(for: 100 * nanosecondsPerMillisecond)
        return saved
    }

    @Test func fullThenResumedWithZeroRTTAccepted() throws {
        let tls = try Self.serverTLS()
        let net = try VirtualNetwork(oneWayDelay: 25 * nanosecondsPerMillisecond, tls: tls)
        net.installEcho()
        let saved = try Self.firstConnection(net)

        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("back on channel 7".utf8), fin: true)
        let start = net.now
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        // The echo of the early message arrives after ONE round trip.
        #expect(net.now - start == 50 * nanosecondsPerMillisecond)
        #expect(client.earlyDataAccepted == true)
        #expect(client.isResumed)
        #expect(net.serverStreamChunks().contains { $0.isEarly && $0.bytes == Array("back on channel 7".utf8) })
        #expect(tls.antiReplayStore?.counters.accepted == 1)
    }

    @Test func zeroRTTRejectedAfterServerRestartIsResentOnceIn1RTT() throws {
        let net = try VirtualNetwork(tls: Self.serverTLS())
        let saved = try Self.firstConnection(net)

        // A restarted server (same ticket key, new anti-replay window) resumes but refuses the early data.
        let restarted = try VirtualNetwork(tls: Self.serverTLS())
        restarted.installEcho()
        let client = try restarted.addClient(resumption: saved)
        let message = Array("join 7".utf8)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, message, fin: true)
        #expect(restarted.run { restarted.clientStreamData(stream).fin })
        #expect(client.earlyDataAccepted == false)
        #expect(client.isResumed)
        #expect(restarted.clientEvents[0].contains { if case .earlyDataRejected = $0 { true } else { false } })
        #expect(restarted.clientStreamData(stream).bytes == message)
        let chunks = restarted.serverStreamChunks()
        #expect(chunks.flatMap(\.bytes) == message, "delivered exactly once")
        #expect(chunks.allSatisfy { !$0.isEarly })
    }

    @Test func zeroRTTRefusedWhenTheServerDisablesEarlyData() throws {
        let net = try VirtualNetwork(tls: Self.serverTLS(earlyData: false))
        net.installEcho()
        let saved = try Self.firstConnection(net)
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, [1, 2, 3], fin: true)
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        #expect(client.earlyDataAccepted == false)
        #expect(net.serverStreamChunks().allSatisfy { !$0.isEarly })
    }

    @Test func earlyDatagramsArriveFlaggedEarly() throws {
        let net = try VirtualNetwork(tls: Self.serverTLS())
        let saved = try Self.firstConnection(net)
        let client = try net.addClient(resumption: saved)
        try client.sendDatagram([9, 9, 9])
        #expect(net.run { net.clientHandshakeCompleted(client: 1) })
        net.run(for: 50 * nanosecondsPerMillisecond)
        let early = net.serverEvents.values.flatMap { $0 }.contains {
            if case .datagram([9, 9, 9], true) = $0 { return true } else { return false }
        }
        #expect(early)
    }

    @Test func savedRTTSeedsTheFirstEstimate() throws {
        let net = try VirtualNetwork(oneWayDelay: 40 * nanosecondsPerMillisecond, tls: Self.serverTLS())
        var saved = try Self.firstConnection(net)
        #expect(saved.smoothedRTT >= 80 * nanosecondsPerMillisecond)
        saved.smoothedRTT = 80 * nanosecondsPerMillisecond
        let client = try net.addClient(resumption: saved)
        // Before any sample, the RTT estimate (and so the first PTO) comes from the saved RTT, not 333 ms.
        #expect(client.statistics.smoothedRTT == 80 * nanosecondsPerMillisecond)
        #expect(client.statistics.rttSampled == false)
    }

    @Test func retryThenZeroRTTStillAccepted() throws {
        let net = try VirtualNetwork(requireRetry: true, tls: Self.serverTLS())
        net.installEcho()
        var saved = try Self.firstConnection(net)
        saved.token = []  // no NEW_TOKEN: the server must Retry
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, [7], fin: true)
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        #expect(net.clientStreamData(stream, client: 1).bytes == [7])
    }

    @Test func newTokenSkipsRetry() throws {
        let net = try VirtualNetwork(requireRetry: true, tls: Self.serverTLS())
        let saved = try Self.firstConnection(net)
        let retriesBefore = net.sentCount.toClient
        _ = retriesBefore
        try net.addClient(resumption: saved)
        let start = net.now
        #expect(net.run { net.clientHandshakeCompleted(client: 1) })
        // With a valid token the server answers the Initial directly: one round trip, no Retry round trip.
        #expect(net.now - start == 20 * nanosecondsPerMillisecond)
    }

    @Test func retryTurnsOnAboveALoadThreshold() throws {
        let net = try VirtualNetwork(tls: Self.serverTLS())
        net.server.limits.retryAboveConnections = 1
        try net.addClient()
        var start = net.now
        #expect(net.run { net.clientHandshakeCompleted() })
        #expect(net.now - start == 20 * nanosecondsPerMillisecond, "below the threshold: no Retry")
        try net.addClient()
        start = net.now
        #expect(net.run { net.clientHandshakeCompleted(client: 1) })
        #expect(net.now - start == 40 * nanosecondsPerMillisecond, "above it: one Retry round trip")
    }
}
