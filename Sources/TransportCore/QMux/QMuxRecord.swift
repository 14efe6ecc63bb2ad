/// QMux records (draft-ietf-quic-qmux-01 §3.2): `Size (i)` then exactly Size bytes of QUIC frames.
package enum QMuxRecord {
    /// Appends one record carrying `frames` (already encoded) to `out`.
    package static func encode(frames: some Collection<UInt8>, into out: inout [UInt8]) {
        VarInt.encode(UInt64(frames.count), into: &out)
        out.append(contentsOf: frames)
    }
}

/// Reassembles records from plaintext arriving in arbitrary pieces. Rejects, as soon as its Size field is
/// readable, a record larger than this endpoint's max_record_size (FRAME_ENCODING_ERROR, §5.2), and a record
/// with an empty Frames field (PROTOCOL_VIOLATION: §3.2 says a record holds one or more frames; RFC 9000 §12.4
/// treats a packet without frames the same way).
package struct QMuxRecordReader {
    let maxRecordSize: UInt64
    private var buffer: [UInt8] = []
    private var start = 0

    package init(maxRecordSize: UInt64) {
        self.maxRecordSize = maxRecordSize
    }

    /// Bytes received but not yet returned as a complete record.
    var bufferedCount: Int { buffer.count - start }

    /// Adds `bytes` behind the partial record left over, in a buffer of exactly their size: between appends the
    /// reader holds at most one partial record, never the capacity of an earlier burst.
    package mutating func append(_ bytes: some Collection<UInt8>) {
        buffer = buffer.remainder(from: start, appending: bytes)
        start = 0
    }

    /// Keeps only the partial record left over (call once the records `next()` returned are processed): between
    /// reads the reader holds no more than that.
    package mutating func dropConsumed() {
        guard start > 0 else { return }
        buffer = buffer.remainder(from: start, appending: EmptyCollection())
        start = 0
    }

    /// The next complete record's Frames field, or nil until more bytes arrive.
    package mutating func next() throws(QMuxError) -> ArraySlice<UInt8>? {
        guard let (size, sizeLength) = VarInt.decode(buffer, at: start) else { return nil }
        guard size <= maxRecordSize else {
            throw QMuxError(
                .frameEncodingError,
                "record Size \(size) exceeds our max_record_size \(maxRecordSize) (§5.2)")
        }
        guard size > 0 else {
            throw QMuxError(.protocolViolation, "record with an empty Frames field (§3.2: one or more frames)")
        }
        let frameStart = start + sizeLength
        guard buffer.count - frameStart >= Int(size) else { return nil }
        let frameEnd = frameStart + Int(size)
        start = frameEnd
        return buffer[frameStart..<frameEnd]
    }
}
