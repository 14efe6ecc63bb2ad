import Testing

@testable import TransportCore

/// A connection refused during its handshake sits in its closing period and repeats its CONNECTION_CLOSE for
/// packets that arrive (RFC 9000 §10.2.1). Its peer never proved its address, so the repeats stay within three
/// times what arrives (§8.1), however small the packets that carry the connection ID.
@Suite("Closing period: no amplification toward an unproven address (sans-IO)")
struct ClosingAmplificationTests {
    @Test func tinyPacketsDrawCloseRepeatsWithinThreeTimesTheirSize() throws {
        let net = try VirtualNetwork()
        var parameters = QUICParameters()
        parameters.alpn = "other/9"  // the server refuses: no_application_protocol
        try net.addClient(parameters: parameters)
        net.run(for: 200 * nanosecondsPerMillisecond)
        let server = try #require(net.serverConnections.first)
        #expect(server.closeReason != nil && !server.isHandshakeCompleted)
        let closeSize = try #require(server.closingPacket?.count)

        // The smallest packet the endpoint routes to it: a short header carrying the client's original DCID.
        let initial = try #require(net.firstFlight(client: 0).first)
        let dcid = Array(initial[6..<(6 + Int(initial[5]))])
        let poke: [UInt8] = [0x40] + dcid
        #expect(3 * poke.count < closeSize, "each poke alone does not pay for a close")
        let before = net.sentCount.toClient
        let pokes = 300
        for _ in 0..<pokes {
            net.inject(poke, fromClient: 0)
            net.run(for: nanosecondsPerMillisecond)
        }
        let repeats = net.sentCount.toClient - before
        #expect(repeats * closeSize <= 3 * pokes * poke.count, "\(repeats) closes of \(closeSize) bytes")
        #expect(repeats >= (3 * pokes * poke.count) / closeSize - 1, "the close is still repeated as earned")
    }

    /// Issue 21, item 7: after the handshake, one spoofed packet moves the connection to a victim's address V (its
    /// current path, not validated), the connection is closed there, and 19-byte packets with its connection ID
    /// from the attacker's own address drew the CONNECTION_CLOSE to V again and again (4.42× on the wire). Every
    /// address that has not proven itself gets at most 3× what it sent, repeats of the close included.
    @Test func aCloseAfterASpoofedMoveIsNotReflectedToTheVictim() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        net.installEcho()
        #expect(
            net.run(until: {
                net.client.isHandshakeCompleted && net.serverConnections.first?.isHandshakeCompleted == true
            }))
        net.run(for: 100 * nanosecondsPerMillisecond)  // HANDSHAKE_DONE and the acknowledgements settle
        let server = try #require(net.serverConnections.first)
        let attacker = net.clientAddress
        let victim = try #require(SocketAddress(host: "198.51.100.7", port: 40000))
        net.unreachable.insert(victim)  // what reaches V never comes back

        // The client's next 1-RTT packet is lost on its way and replayed from V: one spoofed packet.
        let sentBefore = net.sentByClient[0]?.count ?? 0
        net.drop = { toServer, _ in toServer }
        // (Large, so V's 3× budget covers ngtcp2's PATH_CHALLENGE and the close, as it did in the attack.)
        try net.client.sendDatagram([UInt8](repeating: 0x6d, count: 1000))
        net.run(for: nanosecondsPerMillisecond)
        net.drop = { _, _ in false }
        let spoofed = try #require(net.sentByClient[0]?.dropFirst(sentBefore).last?.bytes)
        #expect(spoofed[0] & 0x80 == 0, "a short-header packet")
        net.inject(spoofed, from: victim)
        net.run(for: 2 * nanosecondsPerMillisecond)
        #expect(server.currentRemote == victim, "the spoofed packet moved the connection to V")

        // Closed there (a long reason makes the close large), then poked with its connection ID.
        server.close(code: 7, reason: String(repeating: "x", count: 60), now: net.now)
        net.run(for: nanosecondsPerMillisecond)
        let closeSize = try #require(server.closingPacket?.count)
        let poke = Array(spoofed.prefix(19))  // a short header and the 18-byte connection ID
        #expect(3 * poke.count < closeSize)
        let toAttackerBefore = net.serverBytesTo[attacker, default: 0]
        for _ in 0..<300 {
            net.inject(poke, fromClient: 0)
            net.run(for: nanosecondsPerMillisecond)
        }
        for _ in 0..<100 {  // and from V itself: those earn V its own answers
            net.inject(poke, from: victim)
            net.run(for: nanosecondsPerMillisecond)
        }
        let toVictim = net.serverBytesTo[victim, default: 0]
        let fromVictim = net.serverBytesFrom[victim, default: 0]
        #expect(fromVictim > 0 && toVictim <= 3 * fromVictim, "\(toVictim) bytes to V for \(fromVictim) from it")
        #expect(toVictim > 0, "V's own packets still draw what they pay for")
        // The attacker's own address proved itself in the handshake: its packets draw the close there.
        #expect(net.serverBytesTo[attacker, default: 0] - toAttackerBefore >= 300 * closeSize)
    }
}
