import Testing

@testable import TransportCore

/// The bytes a stream holds for ngtcp2 until acknowledged: each write is copied once, whatever collection it came
/// in, and handed out in order from where ngtcp2 left off.
@Suite("Stream send buffer: one copy per write, handed out in order")
struct StreamSendBufferTests {
    /// The pending bytes, read through the vectors ngtcp2 would get.
    private func pending(_ buffer: StreamSendBuffer) -> [UInt8] {
        buffer.pendingVectors().flatMap { Array(UnsafeBufferPointer(start: $0.base, count: $0.len)) }
    }

    @Test func arraysSlicesAndNonContiguousCollectionsAreCopiedInOrder() {
        var buffer = StreamSendBuffer()
        buffer.append([1, 2, 3] as [UInt8])
        let source: [UInt8] = [9, 9, 4, 5, 9]
        buffer.append(source[2..<4])  // a slice that does not start at 0
        buffer.append((6..<9).lazy.map { UInt8($0) })  // no contiguous storage: the fallback copy
        buffer.append([] as [UInt8])
        #expect(pending(buffer) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(buffer.endOffset == 8 && buffer.bufferedBytes == 8)
    }

    @Test func sentBytesAreSkippedAndAcknowledgedChunksFreed() {
        var buffer = StreamSendBuffer()
        buffer.append(Array(0..<100) as [UInt8])
        buffer.append(Array(100..<200) as [UInt8])
        buffer.markSent(150, fin: false)
        #expect(pending(buffer) == Array(150..<200))
        buffer.acknowledge(upTo: 120)
        #expect(buffer.bufferedBytes == 80)
        #expect(pending(buffer) == Array(150..<200), "the second chunk is still held")
        buffer.finish()
        buffer.markSent(50, fin: true)
        #expect(!buffer.hasPendingData && buffer.finSent)
        buffer.acknowledge(upTo: 200)
        #expect(buffer.bufferedBytes == 0)
    }
}
