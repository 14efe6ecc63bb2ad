import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// A full connection table: the newcomer gets a clear, typed refusal; established connections keep echoing.
@Suite("A full connection table refuses newcomers, not established connections", .integration)
struct ConnectionLimitTests {
    private func echo(_ connection: TransportConnection, _ text: String) async throws -> Bool {
        let stream = try await connection.openStream()
        try await stream.send(Array(text.utf8))
        var iterator = stream.messages.makeAsyncIterator()
        return try await iterator.next()?.bytes == Array(text.utf8)
    }

    @Test func theConnectionOverMaxConnectionsIsRefused() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.maxConnections = 2
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let address = try #require(server.quicAddress)
        let first = try await Fixtures.client().connect(to: address)
        let second = try await Fixtures.client().connect(to: address)

        do {
            let third = try await Fixtures.client().connect(to: address)
            Issue.record("a third connection was accepted by a table of two")
            await third.close()
        } catch let error as TransportError {
            #expect(error.code == .connectionRefused)
            #expect(error.transportErrorCode == 0x02)
            #expect(error.message.contains("server connection limit reached"), "\(error)")
        }
        // From another address too: the limit is the table's, not the source's.
        let other = await BoundQUICClient.echo(from: "127.0.0.2", port: address.port, message: Array("x".utf8))
        #expect(throws: TransportError.self) { try other.get() }
        if case .failure(let error) = other { #expect(error.code == .connectionRefused) }

        #expect(try await echo(first, "first still here"))
        #expect(try await echo(second, "second still here"))
        #expect(await server.connectionCount() == 2)
        await first.close()
        await second.close()
        await server.shutdown()
    }

    static func client(_ policy: FallbackPolicy) -> TransportClient {
        var configuration = Fixtures.client().configuration
        configuration.fallback = policy
        return TransportClient(configuration: configuration)
    }

    /// Issue 21, item 16: `maxConnections` is one budget for QUIC and TCP together. Before, each path had a table of
    /// its own size: connections over TCP filled the TCP one while QUIC still accepted as many again.
    @Test(arguments: [FallbackPolicy.tcpOnly, .quicOnly])
    func connectionsOverEitherPathCountAgainstOneBudget(first policy: FallbackPolicy) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.maxConnections = 2
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let tcp = try #require(server.tcpAddress)
        let quic = try #require(server.quicAddress)
        let other: FallbackPolicy = policy == .tcpOnly ? .quicOnly : .tcpOnly
        let (firstPath, otherPath) = policy == .tcpOnly ? (tcp, quic) : (quic, tcp)
        let (firstClient, otherClient) = (Self.client(policy), Self.client(other))
        let first = try await withTimeout { try await firstClient.connect(to: firstPath) }
        let second = try await withTimeout { try await firstClient.connect(to: firstPath) }

        let refusal = try await withTimeout { () -> TransportError? in
            do {
                let third = try await otherClient.connect(to: otherPath)
                await third.close()
                return nil
            } catch let error as TransportError {
                return error
            }
        }
        #expect(refusal != nil, "a connection over the other path was accepted beyond maxConnections 2")
        if policy == .tcpOnly { #expect(refusal?.code == .connectionRefused, "\(String(describing: refusal))") }
        #expect(try await echo(first, "first still here"))
        #expect(try await echo(second, "second still here"))
        await first.close()
        await second.close()
        // Room again once they are gone (a QUIC connection counts until its closing period ends): the other path
        // is served.
        try await TCPBadInputTests.expectNoConnectionsLeft(server)
        let later = try await withTimeout { try await otherClient.connect(to: otherPath) }
        #expect(try await echo(later, "served once there is room"))
        await later.close()
        await server.shutdown()
    }
}
