import Testing

@testable import TransportCore

/// The core's random bytes are injectable: a virtual-clock run seeded alike, with the same secrets, issues the same
/// connection IDs (the client's first IDs, the server's handshake and NEW_CONNECTION_ID IDs, whose last bytes are
/// the relay's tag); another seed issues others.
@Suite("Reproducible connection IDs on a virtual clock")
struct ReproducibleRandomTests {
    /// What one run's endpoints chose: the client's first destination and source IDs (from its first Initial),
    /// and the IDs the server connection issued, in order.
    struct ChosenIDs: Equatable {
        var clientDestination: [UInt8]
        var clientSource: [UInt8]
        var serverIssued: [ConnectionID]
    }

    /// A handshake and an echo on a fresh network seeded with `seed`.
    static func run(seed: UInt64) throws -> ChosenIDs {
        let secrets = ServerSecrets(
            tokenSecret: [UInt8](repeating: 1, count: 32), statelessResetSecret: [UInt8](repeating: 2, count: 32))
        let net = try VirtualNetwork(secrets: secrets, seed: seed)
        net.installEcho()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, Array("talk".utf8), fin: true)
        #expect(net.run { net.clientStreamData(stream).fin })
        let initial = try #require(net.firstFlight(client: 0).first)
        // Long header: flags, version (4), DCID length, DCID, SCID length, SCID.
        let dcidLength = Int(initial[5])
        let scidLength = Int(initial[6 + dcidLength])
        let server = try #require(net.serverConnections.first)
        return ChosenIDs(
            clientDestination: Array(initial[6..<(6 + dcidLength)]),
            clientSource: Array(initial[(7 + dcidLength)..<(7 + dcidLength + scidLength)]),
            serverIssued: server.issuedConnectionIDs)
    }

    @Test func theSameSeedIssuesTheSameConnectionIDs() throws {
        let first = try Self.run(seed: 42)
        let second = try Self.run(seed: 42)
        #expect(first.clientDestination.count == 18 && first.clientSource.count == 18)
        #expect(first.serverIssued.count > 1, "the handshake's ID and NEW_CONNECTION_ID ones")
        #expect(first == second)
    }

    @Test func anotherSeedIssuesOtherConnectionIDs() throws {
        let first = try Self.run(seed: 42)
        let other = try Self.run(seed: 43)
        #expect(first.clientDestination != other.clientDestination)
        #expect(first.clientSource != other.clientSource)
        #expect(Set(first.serverIssued).isDisjoint(with: other.serverIssued))
    }

    @Test func aSeededIssuerRepeatsItsQUICLBAndSteeredIDs() throws {
        let steering = ConnectionIDSteering(index: 1, count: 4)
        func ids(_ seed: UInt64) -> [ConnectionID] {
            let issuer = ConnectionIDIssuer(steering: steering, random: SeededRandom(seed: seed))
            return (0..<8).map { _ in issuer.makeID() }
        }
        #expect(ids(7) == ids(7))
        #expect(ids(7) != ids(8))
        #expect(ids(7).allSatisfy { Int($0.bytes[0]) % 4 == 1 }, "every ID still names loop 1")
    }

    @Test func aSeededStatelessResetRepeatsItsBytes() throws {
        let secret = [UInt8](repeating: 3, count: 32)
        let id = ConnectionID([UInt8](repeating: 9, count: 18))
        let first = try #require(StatelessReset.packet(secret: secret, cid: id, random: SeededRandom(seed: 5)))
        let second = try #require(StatelessReset.packet(secret: secret, cid: id, random: SeededRandom(seed: 5)))
        #expect(first == second)
        #expect(Array(first.suffix(16)) == QUICConnection.statelessResetToken(secret: secret, cid: id))
    }
}
