/// Incremental RESP2 decoder: feed it bytes as they arrive, split anywhere, and take whole values out.
///
/// Linear: every byte is looked at once, whatever the splits — a partial line is scanned on from where the last
/// call stopped, a bulk payload is waited for by its count and copied once, and nested arrays are built on a stack
/// as their items complete (the decoder this replaced parsed the whole value again from its first byte on every
/// read, so a long reply cost the square of its length).
///
/// Bounded whatever the server sends: a line longer than `maxLineLength`, a bulk string longer than
/// `maxBulkLength`, an array of more than `maxArrayCount` items, arrays nested deeper than `maxDepth`, or one
/// top-level value spanning more than `maxValueBytes` (announced or received) is a `RESPError`, not an allocation
/// and not a wait: a client that knows how long its replies can be sets `maxValueBytes` to that, and a reply that
/// never ends (or a stream of garbage) fails as soon as it passes it.
package struct RESPDecoder {
    package var maxLineLength = 4096
    package var maxBulkLength = 1 << 20
    package var maxArrayCount = 1024
    package var maxDepth = 8
    package var maxValueBytes = 4 << 20

    private enum Step {
        /// Waiting for a value's type byte.
        case type
        /// Reading the header line of a value of this type.
        case line(UInt8)
        /// Waiting for a bulk payload of this many bytes and its CRLF.
        case payload(Int)
    }

    /// An array whose items are still arriving.
    private struct OpenArray {
        var remaining: Int
        var items: [RESPValue]
    }

    private var buffer: [UInt8] = []
    /// The first byte not consumed yet.
    private var position = 0
    private var step = Step.type
    /// Bytes of the current line scanned so far, none of them a line feed.
    private var scanned = 0
    private var open: [OpenArray] = []
    /// Bytes the current top-level value has taken so far, and announced (a bulk payload on its way).
    private var valueBytes = 0
    /// Bytes of the current top-level value consumed so far.
    private var partialBytes = 0

    package init() {}

    /// A decoder for a client that knows its replies are at most `maxValueBytes` long (each bound no larger).
    package init(maxValueBytes: Int, maxArrayCount: Int = 1024, maxDepth: Int = 8) {
        self.maxValueBytes = maxValueBytes
        maxLineLength = min(maxLineLength, maxValueBytes)
        maxBulkLength = min(maxBulkLength, maxValueBytes)
        self.maxArrayCount = maxArrayCount
        self.maxDepth = maxDepth
    }

    /// Bytes received and not yet decoded into a value.
    package var pendingBytes: Int { buffer.count - position + partialBytes }

    /// Bytes held in memory (received and not yet released).
    package var bufferedBytes: Int { buffer.count }

    package mutating func append(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

    /// The next whole value, or nil until more bytes arrive. After a throw the stream is unusable: drop the decoder.
    package mutating func next() throws(RESPError) -> RESPValue? {
        while true {
            let value: RESPValue
            switch step {
            case .type:
                guard position < buffer.count else { return release() }
                let type = buffer[position]
                guard
                    [UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "*")]
                        .contains(type)
                else { throw RESPError("unknown RESP2 type byte 0x\(String(type, radix: 16))") }
                try take(1)
                step = .line(type)
                scanned = 0
                continue
            case .line(let type):
                guard let text = try line() else { return release() }
                guard let decoded = try header(type, text) else { continue }
                value = decoded
            case .payload(let length):
                guard buffer.count - position >= length + 2 else { return release() }
                guard buffer[position + length] == 0x0D, buffer[position + length + 1] == 0x0A else {
                    throw RESPError("bulk string not followed by CRLF")
                }
                value = .bulk(Array(buffer[position..<(position + length)]))
                position += length + 2  // counted against the limit when the header announced it
                partialBytes += length + 2
            }
            step = .type
            if let complete = nest(value) {
                valueBytes = 0
                partialBytes = 0
                return complete
            }
        }
    }

    /// The current line's text once its CRLF arrived (the position moves past it), or nil while it has not.
    private mutating func line() throws(RESPError) -> String? {
        let start = position
        var index = start + scanned
        while index < buffer.count && buffer[index] != 0x0A { index += 1 }
        let length = index - start
        guard length <= maxLineLength + 1 else { throw RESPError("line longer than \(maxLineLength)") }
        guard index < buffer.count else {
            scanned = length
            return nil
        }
        guard length >= 1, buffer[index - 1] == 0x0D else { throw RESPError("line feed without CR") }
        try take(length + 1)
        return String(decoding: buffer[start..<(index - 1)], as: UTF8.self)
    }

    /// The value a header line makes, or nil when more follows it (a bulk payload, an array's items).
    private mutating func header(_ type: UInt8, _ text: String) throws(RESPError) -> RESPValue? {
        switch type {
        case UInt8(ascii: "+"): return .simpleString(text)
        case UInt8(ascii: "-"): return .error(text)
        case UInt8(ascii: ":"): return .integer(try Self.integer(text))
        case UInt8(ascii: "$"):
            guard let length = try Self.length(text, limit: maxBulkLength, "bulk string") else { return .bulk(nil) }
            try take(0, announced: length + 2)  // refused here, before any of it arrives, if the value is too long
            step = .payload(length)
            return nil
        default:
            guard let count = try Self.length(text, limit: maxArrayCount, "array") else { return .array(nil) }
            guard count > 0 else { return .array([]) }
            guard open.count < maxDepth else { throw RESPError("arrays nested deeper than \(maxDepth)") }
            open.append(OpenArray(remaining: count, items: []))
            step = .type
            return nil
        }
    }

    /// Puts `value` into the innermost open array; returns the top-level value it completes, if any.
    private mutating func nest(_ value: RESPValue) -> RESPValue? {
        var value = value
        while !open.isEmpty {
            open[open.count - 1].items.append(value)
            open[open.count - 1].remaining -= 1
            guard open[open.count - 1].remaining == 0 else { return nil }
            value = .array(open.removeLast().items)
        }
        return value
    }

    /// Consumes `count` bytes at the position, and counts them (and `announced` bytes on their way) against
    /// `maxValueBytes`.
    private mutating func take(_ count: Int, announced: Int = 0) throws(RESPError) {
        valueBytes += count + announced
        partialBytes += count
        position += count
        guard valueBytes <= maxValueBytes else { throw RESPError("value longer than \(maxValueBytes) bytes") }
    }

    /// Drops consumed bytes once they are most of the buffer (amortized linear), and returns nil.
    private mutating func release() -> RESPValue? {
        if position == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.count <= 64 * 1024)
            position = 0
        } else if position > 4096 && position * 2 >= buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        return nil
    }

    /// The length a `$` or `*` header announces: nil for -1 (null), else within 0...`limit`.
    private static func length(_ text: String, limit: Int, _ what: String) throws(RESPError) -> Int? {
        let value = try integer(text)
        if value == -1 { return nil }
        guard value >= 0, value <= limit else { throw RESPError("\(what) length \(text.prefix(32))") }
        return Int(value)
    }

    private static func integer(_ text: String) throws(RESPError) -> Int64 {
        guard let value = Int64(text) else { throw RESPError("not an integer: \(text.prefix(32))") }
        return value
    }
}
