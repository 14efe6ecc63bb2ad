import PTTTransport
import TestSupport
import Testing

/// Stream reads belong to the stream, not to a loop: messages that arrive together reach separate loops once
/// each, a cancelled read loses nothing, and a server that replies on the client's stream keeps working.
@Suite("Stream reading: one buffer and decoder per stream", .integration)
struct StreamReadingTests {
    /// The server's script: `pair` → two messages in one write; `mixed` → a message and raw bytes in one write;
    /// `echo:X` → `X` on the same stream.
    static func relay() async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        try await ScriptedRelay.start { _, stream, message in
            switch message.text {
            case "pair": try await stream.write(ScriptedRelay.framed(["one", "two"]))
            case "mixed": try await stream.write(ScriptedRelay.framed(["header"]) + Array("raw tail".utf8))
            case let text where text.hasPrefix("echo:"): try await stream.send(Array(text.dropFirst(5).utf8))
            default: break
            }
        }
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func twoMessagesInOneWriteReachTwoLoopsOnceEach(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            #expect(connection.path == path)
            let stream = try await connection.openStream()
            try await stream.send(Array("pair".utf8))
            var first: String?
            for try await message in stream.messages {
                first = message.text
                break
            }
            var second: String?
            for try await message in stream.messages {
                second = message.text
                break
            }
            #expect(first == "one")
            #expect(second == "two")

            // The server replying on the same stream still works, and nothing is left over from the pair.
            try await stream.send(Array("echo:three".utf8))
            #expect(try await stream.nextMessage()?.text == "three")
            try await stream.finish()
            var rest: [String] = []
            for try await message in stream.messages { rest.append(message.text) }
            #expect(rest.isEmpty)
            #expect(try await stream.nextMessage() == nil)  // the end is remembered
            await connection.close()
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func cancelledReadLeavesTheStreamReadable(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let stream = try await connection.openStream()

            // A single read, cancelled while it waits.
            let waiting = Task { try await stream.nextMessage() }
            try await Task.sleep(for: .milliseconds(50))
            waiting.cancel()
            await #expect(throws: CancellationError.self) { _ = try await waiting.value }
            try await stream.send(Array("echo:after one cancel".utf8))
            #expect(try await stream.nextMessage()?.text == "after one cancel")

            // A whole loop, cancelled the way a timeout cancels it: it ends (nil), as datagram and stream loops do.
            let loop = Task {
                var seen: [String] = []
                for try await message in stream.messages { seen.append(message.text) }
                return seen
            }
            try await Task.sleep(for: .milliseconds(50))
            loop.cancel()
            #expect(try await loop.value == [], "a cancelled message loop ends without an error")
            let chunkLoop = Task {
                var seen = 0
                for try await chunk in stream.chunks { seen += chunk.bytes.count }
                return seen
            }
            try await Task.sleep(for: .milliseconds(50))
            chunkLoop.cancel()
            #expect(try await chunkLoop.value == 0, "a cancelled chunk loop ends without an error")
            try await stream.send(Array("pair".utf8))
            var next: [String] = []
            for try await message in stream.messages {
                next.append(message.text)
                if next.count == 2 { break }
            }
            #expect(next == ["one", "two"])
            await connection.close()
        }
        await server.shutdown()
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func bytesAfterAMessageContinueAtItsEnd(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let stream = try await connection.openStream()
            try await stream.send(Array("mixed".utf8))
            #expect(try await stream.nextMessage()?.text == "header")
            var tail: [UInt8] = []
            for try await chunk in stream.chunks {
                tail += chunk.bytes
                if tail.count >= 8 { break }
            }
            #expect(String(decoding: tail, as: UTF8.self) == "raw tail")
            await connection.close()
        }
        await server.shutdown()
    }

    @Test func concurrentReadersShareTheMessagesWithoutDuplicates() async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(.quic).connect(to: address)
            let stream = try await connection.openStream()
            let readers = (0..<3).map { _ in
                Task {
                    var seen: [String] = []
                    for try await message in stream.messages { seen.append(message.text) }
                    return seen
                }
            }
            let sent = (0..<30).map { "m\($0)" }
            for text in sent { try await stream.send(Array("echo:\(text)".utf8)) }
            try await stream.finish()
            var all: [String] = []
            for reader in readers { all += try await reader.value }
            #expect(all.sorted() == sent.sorted())
            await connection.close()
        }
        await server.shutdown()
    }

    @Test func emptyMessageIsRefusedWithItsOwnCode() async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(.quic).connect(to: address)
            let stream = try await connection.openStream()
            await #expect { try await stream.send([]) } throws: { ($0 as? TransportError)?.code == .messageEmpty }
            await #expect {
                _ = try await ScriptedRelay.client(.quic).connect(
                    to: address, earlyMessages: [EarlyMessage([], replaySafe: true)])
            } throws: { ($0 as? TransportError)?.code == .messageEmpty }
            await connection.close()
        }
        await server.shutdown()
    }
}
