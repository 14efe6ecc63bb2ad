import Testing

@testable import TransportCore

/// Keep-alive is armed only once the handshake completes: ngtcp2 0.12.1 would otherwise send a lone keep-alive
/// PING in a 0-RTT packet during a long resumed handshake — too short for the header-protection sample — and
/// abort. A link reconnecting over a path that has gone silent does exactly that.
@Suite("Keep-alive and the handshake (sans-IO)")
struct KeepAliveHandshakeTests {
    @Test func aResumedHandshakeOnASilentPathOutlastsManyKeepAliveIntervalsThenKeepsTheConnectionOpen() throws {
        let net = try VirtualNetwork(
            oneWayDelay: 10 * nanosecondsPerMillisecond, tls: try ZeroRTTTests.serverTLS())
        net.installEcho()
        let saved = try ZeroRTTTests.firstConnection(net)

        var parameters = QUICParameters()
        parameters.idleTimeout = 5 * nanosecondsPerSecond
        parameters.handshakeTimeout = 10 * nanosecondsPerSecond
        parameters.keepAliveInterval = 100 * nanosecondsPerMillisecond
        net.drop = { _, _ in true }  // the path is silent: nothing gets through either way
        let client = try net.addClient(parameters: parameters, resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("rejoin 7".utf8), fin: false)
        #expect(client.earlyDataAttempted)
        #expect(!net.run(for: 1500 * nanosecondsPerMillisecond) { net.clientHandshakeCompleted(client: 1) })

        net.drop = { _, _ in false }  // the path comes back: the handshake completes
        #expect(net.run(for: 5 * nanosecondsPerSecond) { net.clientHandshakeCompleted(client: 1) })
        net.run(for: 12 * nanosecondsPerSecond)
        #expect(net.clientCloseReason(client: 1) == nil, "the keep-alive holds the idle connection open")
    }
}
