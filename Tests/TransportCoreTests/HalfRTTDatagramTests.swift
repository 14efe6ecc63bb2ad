import Testing

@testable import TransportCore

/// Datagrams a relay queues at 0.5-RTT — a woken phone's catch-up, answered before its handshake completed — leave
/// in the relay's first flight and count against RFC 9000's 3× limit while the phone's address is not validated
/// (ngtcp2 enforces it for every frame it writes, DATAGRAM frames included: nothing of ours writes past it).
@Suite("0.5-RTT datagrams (sans-IO)")
struct HalfRTTDatagramTests {
    /// A resumed client sends its first flight (0-RTT request included); the server answers the request with
    /// `count` 100-byte datagrams at once, as a relay replays a buffered burst. The client's later packets are
    /// lost when `silent`, so the server hears nothing more from it. Returns the network, the client, and the bytes
    /// the server sent to and received from it.
    static func exchange(
        token: Bool, silent: Bool, count: Int = 200
    ) throws
        -> (net: VirtualNetwork, client: QUICConnection, sent: Int, received: Int, queued: Int)
    {
        let net = try VirtualNetwork(oneWayDelay: 25 * nanosecondsPerMillisecond, tls: ZeroRTTTests.serverTLS())
        var saved = try ZeroRTTTests.firstConnection(net)
        if !token { saved.token = [] }  // no NEW_TOKEN: the client's address is not validated by it
        var queued = 0
        net.onServerEvent = { connection, event in
            guard case .streamData(_, _, _, true) = event else { return }
            for index in 0..<count
            where (try? connection.sendDatagram([UInt8](repeating: UInt8(index % 256), count: 100))) != nil {
                queued += 1
            }
        }
        let start = net.now
        if silent { net.drop = { toServer, _ in toServer && net.now > start } }
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("catch up 7".utf8), fin: false)
        net.run(for: 3 * nanosecondsPerSecond)
        let address = net.clientAddress.with(port: 50001)
        return (net, client, net.serverBytesTo[address] ?? 0, net.serverBytesFrom[address] ?? 0, queued)
    }

    @Test func beforeTheAddressIsValidatedTheReplayStaysWithinThreeTimes() throws {
        let (_, _, sent, received, queued) = try Self.exchange(token: false, silent: true)
        #expect(queued == 200, "the relay's replay was queued at 0.5-RTT")
        #expect(received >= 1200)
        #expect(sent <= 3 * received, "sent \(sent) bytes to an address that sent \(received)")
        #expect(sent > 2 * received, "the replay filled the budget, then waited: \(sent) of \(3 * received)")
    }

    @Test func theReplayRidesTheFirstFlightAndTheRestFollowsOnceValidated() throws {
        let (net, client, _, _, queued) = try Self.exchange(token: false, silent: false)
        #expect(queued == 200)
        #expect(client.earlyDataAccepted == true)
        let datagrams = net.clientEvents[1].filter { if case .datagram = $0 { true } else { false } }
        #expect(datagrams.count == 200, "every queued frame arrived once the client's handshake validated it")
    }

    @Test func aNewTokenValidatesTheAddressAndLiftsTheLimit() throws {
        let (_, _, sent, received, queued) = try Self.exchange(token: true, silent: true)
        #expect(queued == 200)
        #expect(sent > 3 * received, "a validated address is not limited: \(sent) bytes for \(received)")
    }
}
