/// Control-message framing on a stream: a QUIC variable-length integer length (RFC 9000 §16), then that many
/// bytes. The decoder accepts bytes in arbitrary chunks and enforces a maximum message size.
package enum MessageFraming {
    /// The default largest message (64 KiB).
    package static let defaultMaximumSize = 64 * 1024

    /// The wire form of one message.
    package static func frame(_ message: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(message.count + VarInt.encodedLength(UInt64(message.count)))
        VarInt.encode(UInt64(message.count), into: &bytes)
        bytes.append(contentsOf: message)
        return bytes
    }
}

/// Reassembles framed messages from stream chunks. It never holds more than one partial message (at most
/// `maximumSize` bytes plus its prefix) and the rest of the chunk that brought it; once a prefix announces more than
/// `maximumSize`, it drops everything it held and refuses every later chunk without keeping it.
package struct MessageDecoder {
    package let maximumSize: Int
    private var buffer: [UInt8] = []
    private var start = 0
    /// Set by the first oversized prefix: every later `feed` throws it again.
    private var failure: TransportError?

    package init(maximumSize: Int = MessageFraming.defaultMaximumSize) { self.maximumSize = maximumSize }

    /// Whether a partial message is buffered (a FIN now would truncate it).
    package var hasPartialMessage: Bool { start < buffer.count }

    /// Appends a chunk and returns every message it completes. Throws `messageTooLarge` as soon as a length
    /// prefix announces more than `maximumSize`, before buffering the body; the decoder then empties its buffer
    /// and throws the same error for every later chunk, keeping none of it.
    package mutating func feed<Bytes: Collection>(_ chunk: Bytes) throws(TransportError) -> [[UInt8]]
    where Bytes.Element == UInt8 {
        if let failure { throw failure }
        buffer.append(contentsOf: chunk)
        var messages: [[UInt8]] = []
        while let (length, prefix) = VarInt.decode(buffer, at: start) {
            guard length <= UInt64(maximumSize) else {
                let error = TransportError(
                    .messageTooLarge,
                    "the peer announced a \(length)-byte message; the maximum is \(maximumSize) bytes")
                failure = error
                buffer = []
                start = 0
                throw error
            }
            let bodyStart = start + prefix
            guard buffer.count - bodyStart >= Int(length) else { break }
            messages.append(Array(buffer[bodyStart..<(bodyStart + Int(length))]))
            start = bodyStart + Int(length)
        }
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 4096 {
            buffer.removeFirst(start)
            start = 0
        }
        return messages
    }

    /// Hands back the bytes after the last complete message (the start of a partial one) and empties the buffer:
    /// for a reader that switches from messages to raw bytes.
    package mutating func takeBuffered() -> [UInt8] {
        let rest = Array(buffer[start...])
        buffer.removeAll()
        start = 0
        return rest
    }

    /// The stream ended: throws if it ended inside a message.
    package func finish() throws(TransportError) {
        if hasPartialMessage {
            throw TransportError(
                .messageTruncated,
                "the stream ended in the middle of a message (\(buffer.count - start) bytes of it arrived)")
        }
    }
}
