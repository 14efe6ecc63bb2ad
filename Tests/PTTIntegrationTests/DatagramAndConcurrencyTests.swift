import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

@Suite("Datagrams and concurrency over real UDP sockets", .integration)
struct DatagramAndConcurrencyTests {
    @Test func thousandDatagramsAreEchoedAndCounted() async throws {
        // Buffers large enough that a busy test machine cannot overflow them: this test checks accounting,
        // not the drop-oldest policy (see the sans-IO tests for that).
        var configuration = Fixtures.serverConfiguration()
        configuration.datagramReceiveBuffer = 4096
        configuration.datagramSendBuffer = 4096
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), datagramReceiveBuffer: 4096,
                datagramSendBuffer: 4096))
        let connection = try await client.connect(to: server.quicAddress!)
        let total = 1000
        let echoed = try await withTimeout {
            try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    var seen = Set<[UInt8]>()
                    for await datagram in connection.datagrams {
                        seen.insert(datagram.payload)
                        if seen.count == total { break }
                    }
                    return seen.count
                }

                for index in 0..<total {
                    let payload = Array("frame \(index) ".utf8) + [UInt8](repeating: 7, count: 60)
                    try connection.sendDatagram(payload)
                    if index % 20 == 19 { try await Task.sleep(for: .milliseconds(2)) }
                }
                let count = try await group.next()!
                group.cancelAll()
                return count
            }
        }
        #expect(echoed == total)
        let stats = await connection.statistics()
        #expect(stats.datagramsSent == UInt64(total))
        #expect(stats.datagramsReceived == UInt64(total))
        #expect(stats.datagramsExpired == 0)
        #expect(stats.datagramsRejected == 0)
        #expect(stats.smoothedRTT > .zero)
        await connection.close()
        await server.shutdown()
    }

    @Test func fiftyConcurrentClientsAreServed() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let client = Fixtures.client()
        let results = try await withTimeout(.seconds(60)) {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<50 {
                    group.addTask {
                        let connection = try await client.connect(to: address)
                        let stream = try await connection.openStream()
                        let message = Array("client \(index) joins channel 7".utf8)
                        try await stream.send(message)
                        try await stream.finish()
                        var echoed: [[UInt8]] = []
                        for try await reply in stream.messages { echoed.append(reply.bytes) }
                        await connection.close()
                        return echoed == [message]
                    }
                }
                var results: [Bool] = []
                for try await result in group { results.append(result) }
                return results
            }
        }
        #expect(results.count == 50)
        #expect(results.allSatisfy { $0 })
        await server.shutdown()
    }

    @Test func statusStreamReportsReadyThenClosed() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        await connection.close(code: 7, reason: "done")
        var statuses: [ConnectionStatus] = []
        for await status in connection.statusUpdates { statuses.append(status) }
        // A subscriber that starts after the close sees just the last status.
        #expect(statuses == [.closed(.local(code: 7, reason: "done"))])
        await server.shutdown()
    }
}
