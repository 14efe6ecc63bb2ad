/// Incremental RESP2 decoder: feed it bytes as they arrive, split anywhere, and take whole values out.
///
/// Bounded whatever the server sends: a line longer than `maxLineLength`, a bulk string longer than
/// `maxBulkLength`, an array of more than `maxArrayCount` items or nested deeper than `maxDepth` is a `RESPError`,
/// not an allocation.
package struct RESPDecoder {
    package var maxLineLength = 4096
    package var maxBulkLength = 1 << 20
    package var maxArrayCount = 1024
    package var maxDepth = 8
    private var buffer: [UInt8] = []
    private var start = 0

    package init() {}

    /// Bytes received and not yet decoded into a value.
    package var pendingBytes: Int { buffer.count - start }

    package mutating func append(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

    /// The next whole value, or nil until more bytes arrive.
    package mutating func next() throws(RESPError) -> RESPValue? {
        var position = start
        guard let value = try parse(at: &position, depth: 0) else { return nil }
        start = position
        if start == buffer.count || start > 4096 {
            buffer.removeFirst(start)
            start = 0
        }
        return value
    }

    private func parse(at position: inout Int, depth: Int) throws(RESPError) -> RESPValue? {
        guard depth <= maxDepth else { throw RESPError("arrays nested deeper than \(maxDepth)") }
        guard position < buffer.count else { return nil }
        let type = buffer[position]
        var cursor = position + 1
        guard let text = try line(at: &cursor) else { return nil }
        let value: RESPValue
        switch type {
        case UInt8(ascii: "+"): value = .simpleString(text)
        case UInt8(ascii: "-"): value = .error(text)
        case UInt8(ascii: ":"): value = .integer(try Self.integer(text))
        case UInt8(ascii: "$"):
            guard let length = try Self.length(text, limit: maxBulkLength, "bulk string") else {
                value = .bulk(nil)
                break
            }
            let end = cursor + length
            guard end + 2 <= buffer.count else { return nil }
            guard buffer[end] == 0x0D, buffer[end + 1] == 0x0A else {
                throw RESPError("bulk string not followed by CRLF")
            }
            value = .bulk(Array(buffer[cursor..<end]))
            cursor = end + 2
        case UInt8(ascii: "*"):
            guard let count = try Self.length(text, limit: maxArrayCount, "array") else {
                value = .array(nil)
                break
            }
            var items: [RESPValue] = []
            for _ in 0..<count {
                guard let item = try parse(at: &cursor, depth: depth + 1) else { return nil }
                items.append(item)
            }
            value = .array(items)
        default:
            throw RESPError("unknown RESP2 type byte 0x\(String(type, radix: 16))")
        }
        position = cursor
        return value
    }

    /// The text up to the next CRLF (the cursor moves past it), or nil when the CRLF has not arrived yet.
    private func line(at cursor: inout Int) throws(RESPError) -> String? {
        var index = cursor
        while index < buffer.count {
            if buffer[index] == 0x0A {
                guard index > cursor, buffer[index - 1] == 0x0D else { throw RESPError("line feed without CR") }
                let text = String(decoding: buffer[cursor..<(index - 1)], as: UTF8.self)
                cursor = index + 1
                return text
            }
            guard index - cursor < maxLineLength else { throw RESPError("line longer than \(maxLineLength)") }
            index += 1
        }
        return nil
    }

    /// The length a `$` or `*` header announces: nil for -1 (null), else within 0...`limit`.
    private static func length(_ text: String, limit: Int, _ what: String) throws(RESPError) -> Int? {
        let value = try integer(text)
        if value == -1 { return nil }
        guard value >= 0, value <= limit else { throw RESPError("\(what) length \(text)") }
        return Int(value)
    }

    private static func integer(_ text: String) throws(RESPError) -> Int64 {
        guard let value = Int64(text) else { throw RESPError("not an integer: \(text.prefix(32))") }
        return value
    }
}
