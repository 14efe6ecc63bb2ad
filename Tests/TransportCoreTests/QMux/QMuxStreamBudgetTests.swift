import TestSupport
import Testing

@testable import TransportCore

/// A relay takes stream data out of its QMux core only as fast as its socket takes the ciphertext (issue 31, item
/// 11: what waits for the socket stays under `TCPConnectionBudget`): `takeOutput(streamBudget:)` frames at most that
/// many bytes, leaves the rest queued, and starts the next call with the stream after the last one served, so a
/// budget starves no stream.
@Suite("QMux: stream data framed within a budget, no stream starved")
struct QMuxStreamBudgetTests {
    /// A client connection that has the server's parameters, with `streams` streams of `bytes` bytes queued.
    static func client(streams: Int, bytes: Int) throws -> (QMuxConnection, [Int64]) {
        let client = QMuxConnection(role: .client, localParameters: qmuxTestParameters(), now: 1)
        _ = client.takeOutput()
        try client.receive(qmuxRecord([.transportParameters(qmuxTestParameters())]), now: 1)
        var ids: [Int64] = []
        for index in 0..<streams {
            let id = try client.openBidirectionalStream()
            try client.write(stream: id, [UInt8](repeating: UInt8(index), count: bytes), fin: true)
            ids.append(id)
        }
        return (client, ids)
    }

    /// Stream data per stream in `output`.
    static func streamBytes(_ output: [UInt8]) throws -> [UInt64: Int] {
        var bytes: [UInt64: Int] = [:]
        for case .stream(let id, _, let data, _) in try qmuxParseRecords(output) { bytes[id, default: 0] += data.count }
        return bytes
    }

    @Test func aBudgetFramesAtMostThatMuchAndKeepsTheRest() throws {
        let (client, _) = try Self.client(streams: 1, bytes: 50_000)
        let first = try Self.streamBytes(client.takeOutput(now: 2, streamBudget: 16_384))
        #expect(first.values.reduce(0, +) == 16_384)
        #expect(client.queuedStreamBytes == 50_000 - 16_384)
        let rest = try Self.streamBytes(client.takeOutput(now: 3))
        #expect(rest.values.reduce(0, +) == 50_000 - 16_384)
        #expect(client.queuedStreamBytes == 0)
    }

    @Test func everyStreamGetsItsTurnUnderABudget() throws {
        let (client, ids) = try Self.client(streams: 4, bytes: 40_000)
        var served: [UInt64: Int] = [:]
        for round in 0..<8 {
            for (id, count) in try Self.streamBytes(client.takeOutput(now: 2 + UInt64(round), streamBudget: 10_000)) {
                served[id, default: 0] += count
            }
        }
        #expect(served.values.reduce(0, +) == 80_000)
        for id in ids { #expect(served[UInt64(id), default: 0] >= 10_000, "stream \(id) was starved: \(served)") }
    }
}
