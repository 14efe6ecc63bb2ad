import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// One source opening connections as fast as it can: over its budget (live connections, new connections per
/// second) it is refused with a clear error, while other sources and its established connections are unaffected.
@Suite("A per-source budget stops one address, not the others", .serialized, .integration)
struct SourceBudgetTests {
    private func echo(_ connection: TransportConnection, _ text: String) async throws -> Bool {
        let stream = try await connection.openStream()
        try await stream.send(Array(text.utf8))
        var iterator = stream.messages.makeAsyncIterator()
        return try await iterator.next()?.bytes == Array(text.utf8)
    }

    /// Connects once a place is free again (a closed connection frees its place after its closing period).
    private func reconnect(_ client: TransportClient, _ address: ServerAddress) async -> TransportConnection? {
        for _ in 0..<100 {
            if let connection = try? await client.connect(to: address) { return connection }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    private func server(_ limits: PerSourceLimits) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        configuration.perSourceLimits = limits
        let server = try await TransportServer.bind(configuration: configuration)
        return (server, server.quicAddress!, Task { await EchoRelay.run(server) })
    }

    @Test func aSourceHoldingItsLiveBudgetIsRefusedAndAnotherSourceConnects() async throws {
        let (server, address, relay) = try await server(
            PerSourceLimits(maxConnections: 3, newConnectionsPerSecond: 1000, burst: 1000))
        defer { relay.cancel() }
        let client = Fixtures.client()
        var held: [TransportConnection] = []
        var refusal: TransportError?
        for _ in 0..<10 {
            do {
                held.append(try await client.connect(to: address))
            } catch let error as TransportError {
                refusal = error
                break
            }
        }
        // 3 without a proven address, then (after a Retry proved it) 3 with one: then the door closes.
        #expect(held.count == 6)
        #expect(refusal?.code == .connectionRefused, "\(String(describing: refusal))")
        #expect(
            refusal?.message.contains("too many connections from this address") == true,
            "\(String(describing: refusal))")
        #expect(refusal?.transportErrorCode == 0x02)

        let other = await BoundQUICClient.echo(from: "127.0.0.2", port: address.port, message: Array("hello".utf8))
        #expect(try other.get() == Array("hello".utf8), "another source is not affected")
        for connection in held { #expect(try await echo(connection, "still served")) }

        await held[0].close()  // closing one frees a place once its closing period is over
        let reopened = await reconnect(client, address)  // closing one frees its place
        #expect(reopened != nil)
        await reopened?.close()
        for connection in held.dropFirst() { await connection.close() }
        await server.shutdown()
    }

    @Test func aSourceOpeningConnectionsTooFastIsRefusedAndAnotherSourceConnects() async throws {
        let (server, address, relay) = try await server(
            PerSourceLimits(maxConnections: 1000, newConnectionsPerSecond: 1, burst: 2))
        defer { relay.cancel() }
        let client = Fixtures.client()
        let established = try await client.connect(to: address)
        var opened = 1
        var refusal: TransportError?
        for _ in 0..<60 {  // faster than 2 per second (1/s per account) unless handshakes take 500 ms
            do {
                let connection = try await client.connect(to: address)
                opened += 1
                await connection.close()
            } catch let error as TransportError {
                refusal = error
                break
            }
        }
        // The burst (2) without a proven address, then 2 more after a Retry, plus what 1/s refilled meanwhile.
        #expect(opened >= 4)
        #expect(refusal?.code == .connectionRefused, "\(String(describing: refusal))")
        #expect(
            refusal?.message.contains("too many new connections from this address") == true,
            "\(String(describing: refusal))")

        let other = await BoundQUICClient.echo(from: "127.0.0.2", port: address.port, message: Array("hi".utf8))
        #expect(try other.get() == Array("hi".utf8), "another source is not affected")
        #expect(try await echo(established, "established connections keep working"))
        await established.close()
        await server.shutdown()
    }

    @Test func theSameBudgetHoldsOverTCP() async throws {
        // A client refused over QUIC must not get round its budget by falling back to TCP.
        var configuration = Fixtures.serverConfiguration()
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        configuration.perSourceLimits = PerSourceLimits(maxConnections: 3, newConnectionsPerSecond: 1000, burst: 1000)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let address = try #require(server.tcpAddress)
        let client = TCPFallbackTests.client(.tcpOnly)
        var held: [TransportConnection] = []
        for _ in 0..<3 { held.append(try await client.connect(to: address)) }
        await #expect(throws: TransportError.self) { _ = try await client.connect(to: address) }
        #expect(await server.tcpAdmissionStatistics().refusedOverSourceLimits >= 1)
        #expect(try await echo(held[0], "held connections keep working"))
        await held[0].close()
        let reopened = await reconnect(client, address)  // closing one frees its place
        #expect(reopened != nil)
        await reopened?.close()
        for connection in held.dropFirst() { await connection.close() }
        await server.shutdown()
    }

    @Test func limitsBelowOneAreAClearConfigurationError() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.perSourceLimits = PerSourceLimits(maxConnections: 0)
        await #expect {
            _ = try await TransportServer.bind(configuration: configuration)
        } throws: {
            ($0 as? TransportError)?.code == .invalidConfiguration
        }
    }
}
