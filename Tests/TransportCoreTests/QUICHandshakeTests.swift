import Testing

@testable import TransportCore

/// Sans-IO: client and server connections on a virtual clock, no sockets.
@Suite("QUIC sans-IO on a virtual clock")
struct QUICSansIOTests {
    @Test func handshakeCompletesInOneRoundTripPlusFinished() throws {
        let net = try VirtualNetwork(oneWayDelay: 25 * nanosecondsPerMillisecond)
        try net.addClient()
        let start = net.now
        #expect(net.run { net.clientHandshakeCompleted() })
        // The client completes after one round trip (Initial → server flight).
        #expect(net.now - start == 50 * nanosecondsPerMillisecond)
        #expect(net.client.negotiatedALPN == "ptt/1")
    }

    @Test func streamEchoWithFin() throws {
        let net = try VirtualNetwork()
        net.installEcho()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        let stream = try #require(try net.client.openBidirectionalStream())
        let payload = Array("join channel 7".utf8)
        try net.client.write(stream: stream, payload, fin: true)
        #expect(net.run { net.clientStreamData(stream).fin })
        #expect(net.clientStreamData(stream).bytes == payload)
    }

    @Test func datagramEcho() throws {
        let net = try VirtualNetwork()
        net.installEcho()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        for index in 0..<50 { try net.client.sendDatagram([UInt8](repeating: UInt8(index), count: 80)) }
        #expect(net.run { net.clientDatagrams().count == 50 })
        #expect(Set(net.clientDatagrams().map { $0[0] }) == Set((0..<50).map(UInt8.init)))
    }

    @Test func handshakeSurvivesSeededLossOfHandshakePackets() throws {
        let net = try VirtualNetwork()
        // Lose the client's first Initial and the server's first two flights' packets.
        net.drop = { toServer, index in toServer ? index == 0 : index < 2 }
        try net.addClient()
        #expect(net.run(for: 10 * nanosecondsPerSecond) { net.clientHandshakeCompleted() })
        #expect(net.client.statistics.ptoCount >= 0)
    }

    @Test func idleTimeoutClosesBothSides() throws {
        var parameters = QUICParameters()
        parameters.idleTimeout = 2 * nanosecondsPerSecond
        let net = try VirtualNetwork(parameters: parameters)
        try net.addClient(parameters: parameters)
        #expect(net.run { net.clientHandshakeCompleted() })
        let start = net.now
        #expect(net.run(for: 60 * nanosecondsPerSecond) { net.clientCloseReason() != nil })
        #expect(net.clientCloseReason() == .idleTimeout)
        #expect(net.now - start >= 2 * nanosecondsPerSecond)
        #expect(net.run(for: 60 * nanosecondsPerSecond) { net.serverCloseReasons().count == 1 })
        #expect(net.serverCloseReasons() == [.idleTimeout])
    }

    @Test func gracefulCloseCarriesCodeAndReason() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.client.close(code: 42, reason: "bye", now: net.now)
        #expect(net.clientCloseReason() == nil || net.clientCloseReason() == .local(code: 42, reason: "bye"))
        #expect(net.run { net.serverCloseReasons().count == 1 })
        #expect(net.serverCloseReasons() == [.peer(code: 42, reason: "bye")])
    }

    @Test func keepAliveHoldsAnIdleConnectionOpen() throws {
        var parameters = QUICParameters()
        parameters.idleTimeout = 2 * nanosecondsPerSecond
        parameters.keepAliveInterval = 500 * nanosecondsPerMillisecond
        let net = try VirtualNetwork(parameters: parameters)
        try net.addClient(parameters: parameters)
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 10 * nanosecondsPerSecond)
        #expect(net.clientCloseReason() == nil)
    }
}
