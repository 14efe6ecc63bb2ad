import PTTTransport
import TestSupport
import Testing

@Suite("Loopback end to end over real UDP sockets", .integration)
struct LoopbackEchoTests {
    @Test(arguments: ["127.0.0.1:0", "[::1]:0"])
    func messagesOnSeveralStreamsAreEchoed(listen: String) async throws {
        let (server, address, relay) = try await Fixtures.echoServer(listen: listen)
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        try await withTimeout {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for streamIndex in 0..<4 {
                    group.addTask {
                        let stream = try await connection.openStream()
                        let sent = (0..<100).map { Array("stream \(streamIndex) message \($0)".utf8) }
                        for message in sent { try await stream.send(message) }
                        try await stream.finish()
                        var received: [[UInt8]] = []
                        for try await message in stream.messages { received.append(message.bytes) }
                        #expect(received == sent)
                    }
                }
                try await group.waitForAll()
            }
        }
        await connection.close()
        await server.shutdown()
    }
}
