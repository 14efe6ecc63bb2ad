import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// Cancelling a task that waits in a connection-level loop (incoming streams, datagrams) ends that loop only:
/// what arrives afterwards goes to the next loop. The datagram buffer stays bounded, keeping the newest.
@Suite("Connection loops: cancellation leaves the connection readable; datagrams stay bounded", .integration)
struct ReadLoopCancellationTests {
    @Test(arguments: [TransportPath.quic, .tcp])
    func incomingStreamsSurviveACancelledLoop(path: TransportPath) async throws {
        let (server, address) = try await Self.serverOnQUICAndTCP()
        try await withTimeout {
            let client = try await ScriptedRelay.client(path).connect(to: address)
            var accepted = server.connections.makeAsyncIterator()
            let serverSide = try #require(await accepted.next())

            await Self.cancelAReaderOf(serverSide.incomingStreams)

            let stream = try await client.openStream()
            try await stream.send(Array("hello".utf8))
            var next: TransportStream?
            for await incoming in serverSide.incomingStreams {
                next = incoming
                break
            }
            let incoming = try #require(next)
            #expect(incoming.id == stream.id)
            #expect(try await incoming.nextMessage()?.text == "hello")
            await client.close()
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func acceptLoopSurvivesACancelledLoop(path: TransportPath) async throws {
        let (server, address) = try await Self.serverOnQUICAndTCP()
        try await withTimeout {
            await Self.cancelAReaderOf(server.connections)

            let client = try await ScriptedRelay.client(path).connect(to: address)
            var accepted = server.connections.makeAsyncIterator()
            let serverSide = try #require(await accepted.next(), "the next accept loop got nothing")
            #expect(serverSide.path == path)
            await client.close()
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func datagramsSurviveACancelledLoop(path: TransportPath) async throws {
        let (server, address) = try await Self.serverOnQUICAndTCP()
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            await Self.cancelAReaderOf(connection.datagrams)

            // The echo relay sends each datagram back; over QUIC one may be lost, so keep sending until one returns.
            let received = Task { () -> Datagram? in
                for await datagram in connection.datagrams { return datagram }
                return nil
            }
            var echoed: Datagram?
            for _ in 0..<100 where echoed == nil {
                try connection.sendDatagram([1, 2, 3])
                echoed = await firstValue(within: .milliseconds(100), Task { await received.value }) ?? nil
            }
            #expect(echoed?.payload == [1, 2, 3])
            await connection.close()
        }
        await server.shutdown()
    }

    /// A server listening on QUIC and TCP, and its QUIC address (the TCP listener shares its port).
    private static func serverOnQUICAndTCP() async throws -> (TransportServer, ServerAddress) {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        let server = try await Fixtures.bindOnStablePort(configuration)
        return (server, try #require(server.quicAddress))
    }

    /// Starts a loop over `sequence`, lets it wait, cancels it and checks that it ended without an element.
    private static func cancelAReaderOf<S: AsyncSequence & Sendable>(_ sequence: S) async {
        let cancelled = Task {
            do {
                for try await _ in sequence { return true }
            } catch {}
            return false
        }
        try? await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        #expect(await cancelled.value == false)
    }

    @Test func unreadDatagramsKeepTheNewestAndCountTheRest() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        try await withTimeout {
            let client = TransportClient(
                configuration: ClientConfiguration(
                    serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                    datagramReceiveBuffer: 4, fallback: .quicOnly))
            let connection = try await client.connect(to: address)
            for index in 0..<20 { try connection.sendDatagram([UInt8(index)]) }
            // Nobody reads: wait until the echoes stop arriving (loopback rarely loses one; count what came).
            var statistics = await connection.statistics()
            var stableRounds = 0
            while stableRounds < 5 && statistics.datagramsReceived < 20 {
                try await Task.sleep(for: .milliseconds(20))
                let now = await connection.statistics()
                stableRounds = now.datagramsReceived == statistics.datagramsReceived ? stableRounds + 1 : 0
                statistics = now
            }
            let received = Int(statistics.datagramsReceived)
            #expect(received > 4)
            #expect(Int(statistics.datagramsDropped) == received - 4)
            var kept: [UInt8] = []
            for await datagram in connection.datagrams {
                kept += datagram.payload
                if kept.count == 4 { break }
            }
            #expect(kept == kept.sorted())
            if received == 20 { #expect(kept == [16, 17, 18, 19]) }
            await connection.close()
        }
        await server.shutdown()
    }
}
