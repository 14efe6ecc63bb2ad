import Testing

@testable import TransportCore

/// What a relay's peer snapshot records for a connection (`QUICConnection.provenRemote`), sans-IO on a virtual
/// clock: the address the peer proved, never one a spoofed packet moved the connection to (issue 31, item 6: one
/// 39-byte spoofed PING put a victim in the snapshot, and a restarted relay sent it 8 resets per connection).
@Suite("The address a peer proved, and what it sent from there")
struct ProvenAddressTests {
    @Test func nothingIsProvenBeforeTheHandshakeCompletes() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        #expect(net.run { !net.serverConnections.isEmpty })
        let server = try #require(net.serverConnections.first)
        #expect(!server.isHandshakeCompleted && server.provenRemote == nil)
        #expect(net.run { server.isHandshakeCompleted })
        let proven = try #require(server.provenRemote)
        #expect(proven.address == net.clientAddress)
        #expect(proven.received >= 1200, "the client's Initial came from there")
    }

    @Test func aSpoofedPacketMovesTheConnectionButNotWhatIsProven() throws {
        let net = try MigrationTests.confirmedCall()
        let server = net.serverConnections[0]
        let victim = MigrationTests.newAddress
        net.unreachable.insert(victim)
        let receivedBefore = try #require(server.provenRemote?.received)
        // The client's next packet is lost and replayed from V.
        let sentBefore = net.sentByClient[0]?.count ?? 0
        net.drop = { toServer, _ in toServer }
        try net.client.sendDatagram([1, 2, 3])
        net.run(for: nanosecondsPerMillisecond)
        net.drop = { _, _ in false }
        let spoofed = try #require(net.sentByClient[0]?.dropFirst(sentBefore).last?.bytes)
        net.inject(spoofed, from: victim)
        net.run(for: 2 * nanosecondsPerMillisecond)
        #expect(server.currentRemote == victim, "the spoofed packet moved the connection to V")
        let proven = try #require(server.provenRemote)
        #expect(proven.address == net.clientAddress, "V never answered: it is not what the snapshot records")
        #expect(proven.received == receivedBefore, "V's bytes are not the handshake address's")
    }

    @Test func aValidatedNewPathIsProvenWithWhatItSent() throws {
        let net = try MigrationTests.confirmedCall()
        let server = net.serverConnections[0]
        try net.client.startMigration(to: MigrationTests.newAddress, now: net.now)
        try MigrationTests.talk(net, count: 20, tag: 1)
        #expect(net.run { !net.client.isMigrating })
        #expect(server.currentRemote == MigrationTests.newAddress)
        let proven = try #require(server.provenRemote)
        #expect(proven.address == MigrationTests.newAddress)
        #expect(proven.received > 20 * 60, "the 20 datagrams came from there")
    }

    @Test func provenAddressesOutliveASprayOfUnprovenOnes() {
        var addresses = PeerAddresses()
        let phone = SocketAddress(host: "192.0.2.1", port: 1)!
        addresses.received(1200, from: phone)
        addresses.validate(phone)
        for port in 2..<100 { addresses.received(39, from: SocketAddress(host: "192.0.2.9", port: UInt16(port))!) }
        #expect(addresses.entries.count == PeerAddresses.limit)
        #expect(addresses.isValidated(phone) && addresses.newestValidated?.received == 1200)
        #expect(addresses.proven(current: SocketAddress(host: "192.0.2.9", port: 99)!)?.address == phone)
    }
}
