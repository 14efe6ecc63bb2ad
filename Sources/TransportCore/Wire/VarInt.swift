/// QUIC variable-length integers (RFC 9000 §16): the length prefix of control messages and every QMux field.
package enum VarInt {
    /// The largest value a variable-length integer can carry (2^62 - 1).
    package static let max: UInt64 = (1 << 62) - 1

    /// The number of bytes `value` takes on the wire (1, 2, 4 or 8).
    static func encodedLength(_ value: UInt64) -> Int {
        precondition(value <= max, "varint out of range")
        switch value {
        case 0..<(1 << 6): return 1
        case (1 << 6)..<(1 << 14): return 2
        case (1 << 14)..<(1 << 30): return 4
        default: return 8
        }
    }

    /// Appends the shortest encoding of `value` to `bytes`.
    package static func encode(_ value: UInt64, into bytes: inout [UInt8]) {
        let length = encodedLength(value)
        let prefix: UInt64 = [1: 0, 2: 1, 4: 2, 8: 3][length]!
        let tagged = value | (prefix << UInt64(length * 8 - 2))
        for index in stride(from: length - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: tagged >> UInt64(index * 8)))
        }
    }

    /// Decodes one integer at `offset`; nil when the buffer ends first (the caller waits for more bytes).
    package static func decode<Bytes: RandomAccessCollection>(
        _ bytes: Bytes, at offset: Bytes.Index
    )
        -> (value: UInt64, length: Int)? where Bytes.Element == UInt8
    {
        guard offset < bytes.endIndex else { return nil }
        let first = bytes[offset]
        let length = 1 << Int(first >> 6)
        guard bytes.distance(from: offset, to: bytes.endIndex) >= length else { return nil }
        var value = UInt64(first & 0x3f)
        var index = bytes.index(after: offset)
        for _ in 1..<length {
            value = (value << 8) | UInt64(bytes[index])
            index = bytes.index(after: index)
        }
        return (value, length)
    }
}
