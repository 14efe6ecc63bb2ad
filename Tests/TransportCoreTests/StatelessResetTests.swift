import Testing

@testable import TransportCore

@Suite("Stateless reset from the persisted secret (sans-IO)")
struct StatelessResetTests {
    @Test func aRestartedServerResetsAStaleClientAtOnce() throws {
        let secrets = ServerSecrets.random()
        let net = try VirtualNetwork(secrets: secrets)
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 100 * nanosecondsPerMillisecond)

        // The relay restarts: same persisted secrets, no memory of the connection.
        net.server = try QUICServerEndpoint(parameters: QUICParameters(), tls: net.server.tls, secrets: secrets)
        net.serverConnections.removeAll()
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [1, 2, 3], fin: true)
        let start = net.now
        #expect(net.run(for: 5 * nanosecondsPerSecond) { net.clientCloseReason() != nil })
        // One round trip, not an idle timeout: the reset token derived from the shared secret matched.
        #expect(net.now - start <= 25 * nanosecondsPerMillisecond)
        if case .failed(let error) = net.clientCloseReason() {
            #expect(error.code == .connectionReset)
        } else {
            Issue.record("expected a reset, got \(String(describing: net.clientCloseReason()))")
        }
    }

    @Test func aServerWithAnotherSecretCannotResetTheClient() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.server = try QUICServerEndpoint(parameters: QUICParameters(), tls: net.server.tls, secrets: .random())
        net.serverConnections.removeAll()
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [1], fin: true)
        net.run(for: nanosecondsPerSecond)
        #expect(net.clientCloseReason() == nil, "a reset with a wrong token is ignored")
    }

    /// A call on relay A, then its next packet goes to relay B instead (a fresh endpoint, as after a crash or on
    /// another host): B's reply, if any, reaches the client. `quicLB` gives A and B QUIC-LB server IDs 0a and 0b.
    static func nextPacketReachesAnotherRelay(
        a: ServerSecrets, b: ServerSecrets, quicLB: (a: String, b: String)? = nil
    ) throws -> (net: VirtualNetwork, repliesToClient: Int) {
        let net = try VirtualNetwork(secrets: a)
        func configuration(_ serverID: String) throws -> QUICLBConfiguration {
            try QUICLBConfiguration(configRotation: 1, serverID: Hex.bytes(serverID)!, nonceLength: 8)
        }
        if let quicLB { try net.server.issueConnectionIDs(steering: nil, quicLB: configuration(quicLB.a)) }
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 100 * nanosecondsPerMillisecond)
        net.server = try QUICServerEndpoint(parameters: QUICParameters(), tls: net.server.tls, secrets: b)
        if let quicLB { try net.server.issueConnectionIDs(steering: nil, quicLB: configuration(quicLB.b)) }
        net.serverConnections.removeAll()
        let before = net.sentCount.toClient + net.endpointReplies
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [1], fin: true)
        net.run(for: nanosecondsPerSecond)
        return (net, net.sentCount.toClient + net.endpointReplies - before)
    }

    /// Issue 31, item 8: relays sharing the fleet's secret answered each other's IDs with the reset the client
    /// holds. Each relay's tokens are its own now, and it answers only IDs it issued: not a byte to the client.
    @Test func anotherRelayOfTheFleetSendsNothingForAConnectionItDidNotIssue() throws {
        let fleet = ServerSecrets.random()
        let (net, replies) = try Self.nextPacketReachesAnotherRelay(a: fleet.forRelay("a"), b: fleet.forRelay("b"))
        #expect(replies == 0, "relay B answered a connection ID it never issued")
        #expect(net.clientCloseReason() == nil)
    }

    @Test func aRelayRestartedWithTheSameIdentityResetsItsOwnConnections() throws {
        let fleet = ServerSecrets.random()
        let (net, replies) = try Self.nextPacketReachesAnotherRelay(a: fleet.forRelay("a"), b: fleet.forRelay("a"))
        #expect(replies > 0)
        if case .failed(let error) = net.clientCloseReason() {
            #expect(error.code == .connectionReset)
        } else {
            Issue.record("expected a reset, got \(String(describing: net.clientCloseReason()))")
        }
    }

    /// With QUIC-LB the server ID decides: even two relays an operator gave the same identity (the same secrets)
    /// leave each other's IDs alone; the relay with the ID's server ID resets it.
    @Test(arguments: [("0a", false), ("0b", true)])
    func withQUICLBARelayResetsOnlyItsServerID(relayB: String, resets: Bool) throws {
        let secrets = ServerSecrets.random().forRelay("same")
        let (net, replies) = try Self.nextPacketReachesAnotherRelay(
            a: secrets, b: secrets, quicLB: (a: "0b", b: relayB))
        #expect((replies > 0) == resets, "\(replies) replies")
        #expect((net.clientCloseReason() != nil) == resets)
    }

    @Test func aTagProvesWhichRelayIssuedAnID() throws {
        let fleet = ServerSecrets.random()
        let (a, b) = (
            try ConnectionIDTag(key: fleet.forRelay("a").connectionIDTagKey),
            try ConnectionIDTag(key: fleet.forRelay("b").connectionIDTagKey)
        )
        let issuer = ConnectionIDIssuer(steering: ConnectionIDSteering(index: 1, count: 4), tag: a)
        for _ in 0..<1000 {
            let id = issuer.makeID()
            #expect(id.count == 18 && id.bytes[0] % 4 == 1, "the loop byte stays")
            #expect(issuer.issued(id) && a.verifies(id) && !b.verifies(id))
            var forged = id.bytes
            forged[Int.random(in: 0..<18)] ^= UInt8.random(in: 1...255)
            #expect(!a.verifies(ConnectionID(forged)))
        }
        #expect((0..<10_000).allSatisfy { _ in !a.verifies(ConnectionID.random(length: 18)) })
        #expect(!ConnectionIDIssuer().issued(ConnectionIDIssuer().makeID()), "no tag: no ID is claimed")
    }
}
