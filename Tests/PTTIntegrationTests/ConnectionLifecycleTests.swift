import PTTTransport
import TestSupport
import Testing

/// Status for every subscriber, an awaitable close, clean versus failing peer closes, and connection identity.
@Suite("Connection lifecycle: status, close codes, identity", .integration)
struct ConnectionLifecycleTests {
    /// The server's script: `close:N` closes the connection with application code N and reason `bye`.
    static func relay() async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        try await ScriptedRelay.start { connection, _, message in
            if message.text.hasPrefix("close:"), let code = UInt64(message.text.dropFirst(6)) {
                await connection.close(code: code, reason: "bye")
            }
        }
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func everyStatusSubscriberSeesReadyAndClosed(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            #expect(connection.status == .ready)
            // Each iterator subscribes when it is made; three of them, read concurrently.
            let subscribers = (0..<3).map { _ in
                Task {
                    var statuses: [ConnectionStatus] = []
                    for await status in connection.statusUpdates { statuses.append(status) }
                    return statuses
                }
            }
            let closeWaiters = (0..<2).map { _ in Task { try await connection.closed() } }
            try await Task.sleep(for: .milliseconds(50))
            await connection.close(code: 5, reason: "done")
            let closed = ConnectionStatus.closed(.local(code: 5, reason: "done"))
            for subscriber in subscribers {
                let statuses = await subscriber.value
                #expect(statuses.last == closed)
                #expect(statuses.contains(.ready) || statuses == [closed])
            }
            for waiter in closeWaiters { #expect(try await waiter.value == .local(code: 5, reason: "done")) }
            #expect(connection.status == closed)
            var late: [ConnectionStatus] = []
            for await status in connection.statusUpdates { late.append(status) }
            #expect(late == [closed])
            #expect(try await connection.closed() == .local(code: 5, reason: "done"))
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func subscribersMadeBeforeTheCloseSeeEveryStep(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            var first = connection.statusUpdates.makeAsyncIterator()
            var second = connection.statusUpdates.makeAsyncIterator()
            var third = connection.statusUpdates.makeAsyncIterator()
            await connection.close(code: 3, reason: "")
            let expected: [ConnectionStatus] = [.ready, .closed(.local(code: 3, reason: ""))]
            for index in 0..<3 {
                var statuses: [ConnectionStatus] = []
                while let status = await (index == 0 ? first.next() : index == 1 ? second.next() : third.next()) {
                    statuses.append(status)
                }
                #expect(statuses == expected)
            }
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func cleanPeerCloseEndsReadLoopsNormally(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let stream = try await connection.openStream()
            try await stream.send(Array("close:0".utf8))
            var received: [Message] = []
            for try await message in stream.messages { received.append(message) }
            #expect(received.isEmpty)
            for try await chunk in stream.chunks { Issue.record("unexpected bytes \(chunk.bytes)") }
            #expect(try await connection.closed() == .peer(code: 0, reason: "bye"))
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func peerCloseWithACodeThrowsOutOfReadLoops(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let stream = try await connection.openStream()
            try await stream.send(Array("close:7".utf8))
            await #expect { for try await _ in stream.messages {} } throws: { error in
                let error = error as? TransportError
                return error?.code == .closedByPeer && error?.applicationErrorCode == 7
            }
            // Every later read reports the same.
            await #expect { _ = try await stream.nextChunk() } throws: {
                ($0 as? TransportError)?.applicationErrorCode == 7
            }
            #expect(try await connection.closed() == .peer(code: 7, reason: "bye"))
        }
        await server.shutdown()
    }

    @Test func connectionsAreIdentifiableAndHashableByIdentity() async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let client = ScriptedRelay.client(.quic)
            let first = try await client.connect(to: address)
            let second = try await client.connect(to: address)
            #expect(first == first)
            #expect(first != second)
            #expect(first.id != second.id)
            #expect(first.id < second.id)
            #expect(Set([first, second, first]).count == 2)
            var sideTable: [TransportConnection.ID: String] = [:]
            sideTable[first.id] = "alice"
            sideTable[second.id] = "bob"
            #expect(sideTable[first.id] == "alice")
            #expect(first.id.description == "connection-\(first.id.rawValue)")
            await first.close()
            await second.close()
        }
        await server.shutdown()
    }

    @Test func publicEnumsPrintReadably() {
        #expect("\(ResumptionStatus.resumed(earlyData: .accepted))" == "resumed (early data accepted)")
        #expect("\(ResumptionStatus.resumed(earlyData: .notAttempted))" == "resumed (early data not attempted)")
        #expect("\(ResumptionStatus.none)" == "not resumed")
        #expect("\(EarlyDataStatus.rejected)" == "rejected")
        #expect("\(ConnectionStatus.closed(.peer(code: 0, reason: "")))" == "closed (closed by peer (code 0))")
        #expect("\(CloseReason.local(code: 7, reason: "bye"))" == "closed locally (code 7, bye)")
        #expect("\(TransportPath.tcp)" == "TCP (QMux)")
        #expect(TransportError.Code.messageEmpty.name == "message-empty")
    }
}
