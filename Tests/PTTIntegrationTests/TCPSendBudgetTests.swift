import PTTTransport
import TestSupport
import Testing

/// A QMux connection holds at most `TLSStreamPump.SendLimits.queuedStreamBytes` of stream data for all its streams
/// together (a relay's: 16 KiB, `TCPConnectionBudget`; issue 21, item 10; issue 31, item 11); writes past it wait for
/// room, in order. Many times that much, on several streams at
/// once, both ways, still arrives whole and in order.
@Suite("TCP send budget: writers wait for room, nothing is lost or reordered", .integration)
struct TCPSendBudgetTests {
    @Test func severalStreamsWritingFarMoreThanTheBudgetAreEchoedInOrder() async throws {
        let (server, address, relay) = try await TCPBadInputTests.tcpServer()
        defer { relay.cancel() }
        let connection = try await withTimeout { try await TCPFallbackTests.client(.tcpOnly).connect(to: address) }
        #expect(connection.path == .tcp)
        let echoed = try await withTimeout(.seconds(60)) {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for streamIndex in 0..<3 {
                    group.addTask {
                        let stream = try await connection.openStream()
                        let messages = (0..<24).map { index in
                            [UInt8](repeating: UInt8(truncatingIfNeeded: streamIndex * 31 + index), count: 60_000)
                        }
                        async let received: [[UInt8]] = {
                            var received: [[UInt8]] = []
                            for try await message in stream.messages { received.append(message.bytes) }
                            return received
                        }()
                        for message in messages { try await stream.send(message) }
                        try await stream.finish()
                        return try await received == messages
                    }
                }
                return try await group.reduce(true) { $0 && $1 }
            }
        }
        #expect(echoed, "every stream's 1.4 MB came back whole and in order")
        await connection.close()
        await server.shutdown()
    }
}
