internal import CNgtcp2

/// The bytes written to one stream that the peer has not acknowledged yet.
///
/// ngtcp2 does not copy stream data: it keeps pointers into this buffer until `acked_stream_data_offset`
/// reports the range acknowledged. Each chunk is one heap allocation with a stable address, written once
/// (the only copy of the application's bytes) and freed when fully acknowledged.
struct StreamSendBuffer {
    private final class Chunk {
        let bytes: UnsafeMutableRawBufferPointer
        let offset: UInt64  // stream offset of bytes[0]
        init<Bytes: Collection>(_ data: Bytes, offset: UInt64) where Bytes.Element == UInt8 {
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 1)
            // One copy of contiguous bytes (arrays, slices, Data). Called from another module, this generic is not
            // specialised, and an element-wise copy would allocate once per byte.
            let copied: Void? = data.withContiguousStorageIfAvailable {
                bytes.copyMemory(from: UnsafeRawBufferPointer($0))
            }
            if copied == nil { Array(data).withUnsafeBytes { bytes.copyMemory(from: $0) } }
            self.bytes = bytes
            self.offset = offset
        }
        var end: UInt64 { offset + UInt64(bytes.count) }
        deinit { bytes.deallocate() }
    }

    private var chunks: [Chunk] = []
    /// Everything below this offset is acknowledged and freed.
    private(set) var ackedOffset: UInt64 = 0
    /// Everything below this offset was handed to ngtcp2.
    private(set) var sentOffset: UInt64 = 0
    /// The end of the data written so far.
    private(set) var endOffset: UInt64 = 0
    /// `finish()` was called: FIN goes out after the last byte.
    private(set) var finQueued = false
    /// ngtcp2 accepted the FIN.
    private(set) var finSent = false

    /// Bytes held: written but not yet acknowledged.
    var bufferedBytes: UInt64 { endOffset - ackedOffset }
    /// Whether anything (bytes or FIN) still has to be handed to ngtcp2.
    var hasPendingData: Bool { sentOffset < endOffset || (finQueued && !finSent) }

    mutating func append<Bytes: Collection>(_ data: Bytes) where Bytes.Element == UInt8 {
        precondition(!finQueued, "write after finish")
        guard !data.isEmpty else { return }
        chunks.append(Chunk(data, offset: endOffset))
        endOffset += UInt64(data.count)
    }

    mutating func finish() { finQueued = true }

    /// The unsent bytes as at most `limit` vectors pointing into the chunks (valid until acknowledged).
    func pendingVectors(limit: Int = 16) -> [ngtcp2_vec] {
        var vectors: [ngtcp2_vec] = []
        for chunk in chunks where chunk.end > sentOffset {
            let skip = Int(sentOffset > chunk.offset ? sentOffset - chunk.offset : 0)
            let base = chunk.bytes.baseAddress!.advanced(by: skip).assumingMemoryBound(to: UInt8.self)
            vectors.append(ngtcp2_vec(base: base, len: chunk.bytes.count - skip))
            if vectors.count == limit { break }
        }
        return vectors
    }

    /// Whether the pending vectors reach the end of the buffer (so FIN may ride along).
    func vectorsReachEnd(limit: Int = 16) -> Bool {
        chunks.lazy.filter { $0.end > sentOffset }.count <= limit
    }

    /// ngtcp2 took `count` bytes (and the FIN if `fin` and everything was taken).
    mutating func markSent(_ count: Int, fin: Bool) {
        sentOffset += UInt64(count)
        if fin && sentOffset == endOffset && finQueued { finSent = true }
    }

    /// The peer acknowledged everything below `offset`: free those chunks.
    mutating func acknowledge(upTo offset: UInt64) {
        guard offset > ackedOffset else { return }
        ackedOffset = min(offset, endOffset)
        var drop = 0
        while drop < chunks.count, chunks[drop].end <= ackedOffset { drop += 1 }
        if drop > 0 { chunks.removeFirst(drop) }
    }

    /// 0-RTT was rejected: ngtcp2 forgot every byte, so everything not acknowledged goes out again.
    mutating func rewindForResend() {
        sentOffset = ackedOffset
        finSent = false
    }
}
