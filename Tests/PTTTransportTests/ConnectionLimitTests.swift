import Foundation
import PTTTransport
import Testing

/// A full connection table: the newcomer gets a clear, typed refusal; established connections keep echoing.
@Suite("A full connection table refuses newcomers, not established connections")
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
        let address = try #require(ServerAddress(server.quicAddress!))
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
}
