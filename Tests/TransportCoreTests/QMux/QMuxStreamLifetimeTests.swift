import Testing

@testable import TransportCore

/// What a connection keeps per stream ends with the stream (issue 21, item 14): a stream whose both parts finished
/// is forgotten and reported as `.streamClosed`, so the owner frees its own per-stream state (the STOP_SENDING
/// code kept to refuse writes) instead of keeping one entry per stream for the connection's life.
@Suite("QMux stream lifetime: closed streams are reported and forgotten")
struct QMuxStreamLifetimeTests {
    typealias Pair = QMuxOverTLSTests.Pair

    static func closed(_ events: [QUICEvent]) -> [Int64] {
        events.compactMap { if case .streamClosed(let id) = $0 { id } else { nil } }
    }

    @Test func aStreamStoppedAfterItsFINIsReportedClosed() throws {
        let pair = try Pair()
        pair.run()
        var ids: [Int64] = []
        for _ in 0..<50 {
            let id = try #require(try pair.client.openBidirectionalStream())
            try pair.client.write(stream: id, [0x78], fin: true)
            pair.client.stopSending(id, code: 7)  // the attacker's pattern: data, FIN, STOP_SENDING
            ids.append(id)
        }
        pair.run()
        #expect(pair.serverEvents.contains { if case .stopSending = $0 { true } else { false } })
        #expect(Self.closed(pair.serverEvents).sorted() == ids, "every stopped stream ended on the server")
        #expect(pair.server.qmux.streams.isEmpty, "the server keeps nothing for them")
    }

    @Test func anEchoedStreamIsReportedClosedOnBothSides() throws {
        let pair = try Pair()
        pair.run()
        let id = try #require(try pair.client.openBidirectionalStream())
        try pair.client.write(stream: id, Array("ping".utf8), fin: true)
        pair.run()
        try pair.server.write(stream: id, Array("pong".utf8), fin: true)
        pair.run()
        #expect(Self.closed(pair.serverEvents) == [id])
        #expect(Self.closed(pair.clientEvents) == [id])
    }
}
