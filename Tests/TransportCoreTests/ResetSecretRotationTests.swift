import Testing

@testable import TransportCore

/// Issue 36, item 5: the stateless-reset secret rotates like the ticket key. During a rotation the relay holds the
/// new secret and the previous one: connection IDs it issued under the previous one are still answered with the
/// reset their clients hold, new IDs and their tokens come from the new one. Sans-IO: one client, one relay whose
/// endpoint is replaced to play a restart.
@Suite("Stateless-reset secret rotation (sans-IO)")
struct ResetSecretRotationTests {
    static let relay = "relay-a"

    /// The fleet's secrets before the rotation, and after it (new reset secret, the old one as previous).
    static func rotation() -> (before: ServerSecrets, after: ServerSecrets) {
        let before = ServerSecrets.random()
        let after = ServerSecrets(
            tokenSecret: before.tokenSecret, statelessResetSecret: ServerSecrets.random().statelessResetSecret,
            previousStatelessResetSecret: before.statelessResetSecret)
        return (before.forRelay(relay), after.forRelay(relay))
    }

    /// The relay restarts with `secrets` (no memory of the call); the client's next packet meets it. Whether the
    /// client recognised a reset within one round trip, and how many replies it got.
    static func restart(_ net: VirtualNetwork, with secrets: ServerSecrets) throws -> (reset: Bool, replies: Int) {
        net.server = try QUICServerEndpoint(parameters: QUICParameters(), tls: net.server.tls, secrets: secrets)
        net.serverConnections.removeAll()
        let before = net.sentCount.toClient + net.endpointReplies
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [1, 2, 3], fin: true)
        let start = net.now
        _ = net.run(for: nanosecondsPerSecond) { net.clientCloseReason() != nil }
        var reset = false
        if case .failed(let error) = net.clientCloseReason() {
            reset = error.code == .connectionReset && net.now - start <= 25 * nanosecondsPerMillisecond
        }
        return (reset, net.sentCount.toClient + net.endpointReplies - before)
    }

    static func call(_ secrets: ServerSecrets) throws -> VirtualNetwork {
        let net = try VirtualNetwork(secrets: secrets)
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 100 * nanosecondsPerMillisecond)
        return net
    }

    @Test func aRelayRestartedMidRotationResetsAConnectionFromBeforeIt() throws {
        let (before, after) = Self.rotation()
        let net = try Self.call(before)
        let (reset, _) = try Self.restart(net, with: after)
        #expect(
            reset, "the client holds the token of the previous secret: \(String(describing: net.clientCloseReason()))")
    }

    /// The control: the new secret alone (the previous one dropped too early) does not claim the old IDs.
    @Test func withoutThePreviousSecretTheOldConnectionHearsNothing() throws {
        let (before, after) = Self.rotation()
        let net = try Self.call(before)
        let alone = ServerSecrets(tokenSecret: after.tokenSecret, statelessResetSecret: after.statelessResetSecret)
        let (reset, replies) = try Self.restart(net, with: alone)
        #expect(!reset && replies == 0, "\(replies) replies")
    }

    /// A reload (SIGHUP) rotates the secret of a live relay: the call carries on, and after a later crash the
    /// restarted relay (same files) still resets it with the token its client holds.
    @Test func aCallAcrossTheReloadIsStillResetAfterACrash() throws {
        let (before, after) = Self.rotation()
        let net = try Self.call(before)
        net.installEcho()
        try net.server.reload(tls: net.server.tls, secrets: after)
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [9, 9], fin: true)
        #expect(net.run { net.clientStreamData(stream).fin }, "the call carries on across the reload")
        #expect(net.clientStreamData(stream).bytes == [9, 9])
        #expect(net.clientCloseReason() == nil)
        let (reset, _) = try Self.restart(net, with: after)
        #expect(reset, "\(String(describing: net.clientCloseReason()))")
    }

    /// After the reload, new connections get IDs and tokens of the new secret: a relay that later dropped the
    /// previous secret still resets them.
    @Test func aConnectionAfterTheReloadUsesTheNewSecret() throws {
        let (before, after) = Self.rotation()
        let net = try VirtualNetwork(secrets: before)
        try net.server.reload(tls: net.server.tls, secrets: after)
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        net.run(for: 100 * nanosecondsPerMillisecond)
        let alone = ServerSecrets(tokenSecret: after.tokenSecret, statelessResetSecret: after.statelessResetSecret)
        let (reset, _) = try Self.restart(net, with: alone)
        #expect(reset, "\(String(describing: net.clientCloseReason()))")
    }

    @Test func theIssuerTellsWhichSecretAnIDWasIssuedUnder() throws {
        let (before, after) = Self.rotation()
        let tls = try VirtualNetwork().server.tls
        let old = try QUICServerEndpoint(parameters: QUICParameters(), tls: tls, secrets: before)
        let new = try QUICServerEndpoint(parameters: QUICParameters(), tls: tls, secrets: after)
        for _ in 0..<200 {
            let oldID = old.connectionIDs.makeID()
            let newID = new.connectionIDs.makeID()
            #expect(new.connectionIDs.generation(of: oldID) == .previous)
            #expect(new.connectionIDs.generation(of: newID) == .current)
            #expect(old.connectionIDs.generation(of: newID) == nil)
            #expect(new.resetSecret(for: oldID) == after.previousStatelessResetSecret)
            #expect(new.resetSecret(for: newID) == after.statelessResetSecret)
        }
        #expect(new.resetSecret(for: ConnectionID.random(length: 18)) == nil, "a stranger's ID is not claimed")
        let same = ServerSecrets(
            tokenSecret: before.tokenSecret, statelessResetSecret: before.statelessResetSecret,
            previousStatelessResetSecret: before.statelessResetSecret)
        #expect(same.previousStatelessResetSecret == nil, "the same secret twice is no rotation")
    }
}
