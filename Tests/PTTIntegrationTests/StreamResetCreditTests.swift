import PTTTransport
import TestSupport
import Testing

/// A reset stream's bytes never starve a connection, QUIC or QMux (issue 21, item 5/10 follow-up). The relay's
/// windows follow its memory budget (one largest message per connection), so every byte a reset stream leaves
/// behind must give its connection credit back: bytes the relay's application never read, and bytes the client
/// still had in flight when the relay reset the stream. Real UDP and TLS over loopback TCP, our client and server.
@Suite("Reset streams give their connection credit back, end to end, on both paths", .integration)
struct StreamResetCreditTests {
    /// What the test's relay does with a stream, named by the stream's first message.
    enum Kind: String {
        /// Reset the stream at once (RESET_STREAM and STOP_SENDING) while the client's bytes are in flight.
        case reset
        /// Never read again; the client resets the stream later.
        case ignore
        /// Echo every further message, then FIN.
        case echo
    }

    static func serve(_ stream: TransportStream) async {
        guard let first = try? await stream.nextMessage(),
            let kind = Kind(rawValue: String(decoding: first.bytes, as: UTF8.self))
        else { return }
        switch kind {
        case .reset:
            stream.reset(code: 9)
        case .ignore:
            return
        case .echo:
            do {
                for try await message in stream.messages { try await stream.send(message.bytes) }
                try await stream.finish()
            } catch {
                Issue.record("the echo stream failed: \(error)")
            }
        }
    }

    /// Eight streams of 60,000 bytes each (several times the relay's connection window), none of them read by
    /// the relay: half reset by the relay as the bytes arrive, half reset by the client. Then a fresh stream
    /// echoes one largest message; returns the messages echoed on it.
    static func exchange(on connection: TransportConnection, message: [UInt8]) async throws -> [[UInt8]] {
        for round in 0..<8 {
            let kind: Kind = round.isMultiple(of: 2) ? .reset : .ignore
            let stream = try await connection.openStream()
            try await stream.send(Array(kind.rawValue.utf8))
            try? await stream.write(Array(repeating: 0x5a, count: 60_000))  // fails once the relay stopped it
            if kind == .ignore { stream.reset(code: 4) } else { try? await stream.finish() }
        }
        let stream = try await connection.openStream()
        try await stream.send(Array(Kind.echo.rawValue.utf8))
        try await stream.send(message)
        try await stream.finish()
        var received: [[UInt8]] = []
        for try await echoed in stream.messages { received.append(echoed.bytes) }
        return received
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func manyStreamsResetWithDataInFlightThenAFreshStreamEchoes64KiB(policy: FallbackPolicy) async throws {
        var configuration = Fixtures.serverConfiguration()
        if policy == .tcpOnly {
            configuration.quic = nil
            configuration.tcp = "127.0.0.1:0"
        }
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task {
            await server.handleEachConnection { connection in
                await withDiscardingTaskGroup { group in
                    for await stream in connection.incomingStreams { group.addTask { await Self.serve(stream) } }
                }
            }
        }
        defer { relay.cancel() }
        let address = try #require(policy == .tcpOnly ? server.tcpAddress : server.quicAddress)
        let largest = configuration.maximumMessageSize  // about the relay's connection window

        let connection = try await TCPFallbackTests.client(policy).connect(to: address)
        #expect(connection.path == (policy == .tcpOnly ? .tcp : .quic))
        let message = (0..<largest).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        // A starved connection would wait forever (opening a stream, writing, reading are not cancellable):
        // closing it after a generous minute fails every one of them, and the test with them.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            await connection.close(code: 1, reason: "starved: the exchange took over a minute")
        }
        defer { watchdog.cancel() }
        let received = try await Self.exchange(on: connection, message: message)
        #expect(received == [message], "the fresh stream's \(message.count)-byte message came back")
        await connection.close()
        await server.shutdown()
    }
}
