import PTTTransport
import Synchronization
import TestSupport
import Testing

/// `TransportServer.handleEachConnection`: one handler per connection, the call ending with the server, and
/// cancellation reaching every handler.
@Suite("Handling each connection", .integration)
struct EachConnectionTests {
    @Test func everyConnectionGetsAHandlerAndTheCallEndsWithTheServer() async throws {
        let server = try await TransportServer.bind(configuration: Fixtures.serverConfiguration())
        let address = try #require(server.quicAddress)
        let handled = Mutex(0)
        let serving = Task {
            await server.handleEachConnection { connection in
                handled.withLock { $0 += 1 }
                for await stream in connection.incomingStreams {
                    while let message = try? await stream.nextMessage() { try? await stream.send(message.bytes) }
                }
            }
        }
        try await withTimeout {
            var connections: [TransportConnection] = []
            for index in 0..<3 {
                let connection = try await Fixtures.client().connect(to: address)
                let stream = try await connection.openStream()
                try await stream.send(Array("hello \(index)".utf8))
                #expect(try await stream.nextMessage()?.bytes == Array("hello \(index)".utf8))
                connections.append(connection)
            }
            #expect(handled.withLock { $0 } == 3)
            for connection in connections { await connection.close() }
            await server.shutdown()
            await serving.value  // returns: no more connections, and every handler returned
        }
    }

    @Test func cancellingTheCallCancelsEveryHandler() async throws {
        let server = try await TransportServer.bind(configuration: Fixtures.serverConfiguration())
        let address = try #require(server.quicAddress)
        let started = Mutex(0)
        let cancelled = Mutex(0)
        let serving = Task {
            await server.handleEachConnection { _ in
                started.withLock { $0 += 1 }
                try? await Task.sleep(for: .seconds(3600))  // a handler that only ends when cancelled
                if Task.isCancelled { cancelled.withLock { $0 += 1 } }
            }
        }
        try await withTimeout {
            let first = try await Fixtures.client().connect(to: address)
            let second = try await Fixtures.client().connect(to: address)
            while started.withLock({ $0 }) < 2 { try await Task.sleep(for: .milliseconds(10)) }
            serving.cancel()
            await serving.value
            #expect(cancelled.withLock { $0 } == 2)
            await first.close()
            await second.close()
        }
        await server.shutdown()
    }
}
