import PTTTransport
import Testing
import TransportCore

/// The relay-to-phone channel (issue 33, item 3): the relay pushes with `TransportConnection.pushNotice(_:)`, the
/// phone reads one `link.notices` loop that continues across a network change (a new connection) and a suspension
/// and wake, over QUIC and TCP; a second reader that comes later gets every notice from then on too, and both end
/// when the link stops.
@Suite("TransportLink notices: the relay's pushes across reconnects", .integration)
struct LinkNoticesTests {
    /// On each rejoin (the link's first stream, "join"): pushes "welcome N" (N counts the joins), then echoes the
    /// rejoin. On a request `push:X`: pushes X, then replies with the request.
    static func relay() async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        let joins = Locked(0)
        return try await ScriptedRelay.start { connection, stream, message in
            if stream.id == 0 {
                let count = joins.withLock { count in
                    count += 1
                    return count
                }
                try await connection.pushNotice(Array("welcome \(count)".utf8))
                try await stream.send(message.bytes)
                return
            }
            let request = try RequestEnvelope(decoding: message.bytes)
            let text = String(decoding: request.body, as: UTF8.self)
            if text.hasPrefix("push:") { try await connection.pushNotice(Array(text.dropFirst(5).utf8)) }
            try await stream.send(request.reply(request.body).encoded)
        }
    }

    /// The next notice of `reader` as text (nil: the notices ended), bounded.
    static func next(_ reader: LinkNotices.AsyncIterator) async throws -> String? {
        try await withTimeout {
            var reader = reader  // the copy shares the reader's place
            return await reader.next().map { String(decoding: $0.bytes, as: UTF8.self) }
        }
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func oneLoopHearsThePushesOfEveryConnection(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        let link = TransportLink(
            client: ScriptedRelay.client(path), to: address,
            rejoin: [EarlyMessage(Array("join".utf8), replaySafe: true)],
            backoff: ReconnectBackoff(initial: .milliseconds(100), maximum: .seconds(1)))
        let first = link.notices.makeAsyncIterator()
        #expect(try await Self.next(first) == "welcome 1")
        #expect(try await withTimeout { try await link.request(Array("push:one".utf8)) } == Array("push:one".utf8))
        #expect(try await Self.next(first) == "one")

        // A second reader, then a new connection: both hear its pushes.
        let second = link.notices.makeAsyncIterator()
        let before = try #require(link.connection)
        link.networkChanged()
        #expect(try await Self.next(first) == "welcome 2")
        #expect(try await Self.next(second) == "welcome 2")
        #expect(link.connection !== before)
        _ = try await withTimeout { try await link.request(Array("push:two".utf8)) }
        #expect(try await Self.next(first) == "two")
        #expect(try await Self.next(second) == "two")

        // Suspended and woken: a third connection, the same loops.
        await link.suspend()
        _ = try await withTimeout { try await link.wake() }
        #expect(try await Self.next(first) == "welcome 3")
        #expect(try await Self.next(second) == "welcome 3")

        link.stop()
        #expect(try await Self.next(first) == nil)
        #expect(try await Self.next(second) == nil)
        await server.shutdown()
    }

    /// Garbage on the relay's side: an empty push is refused with a typed error before anything is sent, and a
    /// push on a closed connection throws instead of waiting.
    @Test(arguments: [TransportPath.quic, .tcp])
    func aBadPushIsATypedError(path: TransportPath) async throws {
        let pushed = Locked<TransportConnection?>(nil)
        let (server, address, relay) = try await ScriptedRelay.start { connection, stream, message in
            pushed.withLock { $0 = connection }
            try await stream.send(message.bytes)
        }
        defer { relay.cancel() }
        try await withTimeout {
            let client = try await ScriptedRelay.client(path).connect(to: address)
            let stream = try await client.openStream()
            try await stream.send(Array("hello".utf8))
            _ = try await stream.nextMessage()
            let connection = try #require(pushed.withLock { $0 })
            do {
                try await connection.pushNotice([])
                Issue.record("an empty push was sent")
            } catch let error as TransportError {
                #expect(error.code == .messageEmpty, "\(error)")
            }
            try await connection.pushNotice(Array("fine".utf8))
            let notices = try #require(await client.incomingStreams.first { _ in true })
            #expect(try await notices.nextMessage()?.bytes == Array("fine".utf8))
            await client.close()
            _ = try await connection.closed()
            await #expect(throws: TransportError.self) { try await connection.pushNotice(Array("late".utf8)) }
        }
        await server.shutdown()
    }
}
