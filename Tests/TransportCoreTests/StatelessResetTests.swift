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
}
