import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// The relay's stream limit (`maxStreamsPerConnection`, 4 by default) on both paths: one stream finished on both
/// sides lets the next `openStream()` proceed at once (QMux used to return stream credit only after half the limit
/// had closed), and an `openStream()` waiting for credit ends with `CancellationError` when its task is cancelled.
@Suite("Stream limit: credit per closed stream, cancellable waits", .integration)
struct StreamLimitTests {
    /// An echo relay on QUIC, or on TCP alone; its address and the client for that path.
    static func relay(_ policy: FallbackPolicy) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        if policy == .tcpOnly {
            configuration.quic = nil
            configuration.tcp = "127.0.0.1:0"
        }
        let server = try await TransportServer.bind(configuration: configuration)
        let address = try #require(policy == .tcpOnly ? server.tcpAddress : server.quicAddress)
        return (server, address, Task { await EchoRelay.run(server) })
    }

    /// A relay on `policy`'s path, and a connection to it with the relay's limit of streams open, each with one
    /// message echoed.
    static func connectionAtTheLimit(
        _ policy: FallbackPolicy
    ) async throws -> (TransportServer, Task<Void, Never>, TransportConnection, [TransportStream]) {
        let (server, address, relay) = try await Self.relay(policy)
        let connection = try await TCPFallbackTests.client(policy).connect(to: address)
        var streams: [TransportStream] = []
        for index in 0..<Fixtures.serverConfiguration().maxStreamsPerConnection {
            let stream = try await connection.openStream()
            try await stream.send(Array("stream \(index)".utf8))
            #expect(try await stream.nextMessage()?.bytes == Array("stream \(index)".utf8))
            streams.append(stream)
        }
        return (server, relay, connection, streams)
    }

    /// Finishes `stream` on both sides (our FIN, then the relay's: its echo ends with the stream); then the next
    /// `openStream()` must proceed (within a generous 10 s) and echo `text`.
    static func finishThenOpenAnother(
        _ stream: TransportStream, on connection: TransportConnection, echoing text: String
    ) async throws {
        try await stream.finish()
        while try await stream.nextMessage() != nil {}
        let next = try await withTimeout(.seconds(10)) { try await connection.openStream() }
        try await next.send(Array(text.utf8))
        #expect(try await next.nextMessage()?.bytes == Array(text.utf8))
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func oneFinishedStreamLetsTheNextOpenProceed(policy: FallbackPolicy) async throws {
        let (server, relay, connection, streams) = try await Self.connectionAtTheLimit(policy)
        defer { relay.cancel() }
        try await Self.finishThenOpenAnother(streams[0], on: connection, echoing: "after one close")
        await connection.close()
        await server.shutdown()
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func anOpenWaitingForCreditEndsWhenCancelled(policy: FallbackPolicy) async throws {
        let (server, relay, connection, streams) = try await Self.connectionAtTheLimit(policy)
        defer { relay.cancel() }
        let waiting = Task { try await connection.openStream() }
        try await Task.sleep(for: .milliseconds(200))  // it waits for credit the relay has no reason to give
        waiting.cancel()
        let outcome = try await withTimeout(.seconds(10)) { await waiting.result }
        #expect(throws: CancellationError.self) { try outcome.get() }
        // The connection is unharmed: a stream finished, and the next open proceeds.
        try await Self.finishThenOpenAnother(streams[1], on: connection, echoing: "still open")
        await connection.close()
        await server.shutdown()
    }
}
