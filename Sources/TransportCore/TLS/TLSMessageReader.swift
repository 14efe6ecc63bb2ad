/// Reads the big-endian numbers and length-prefixed vectors of a TLS handshake message body (RFC 8446 §3), never
/// past its end: every read returns nil or false instead.
struct TLSMessageReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func skip(_ count: Int) -> Bool {
        guard count <= bytes.count - offset else { return false }
        offset += count
        return true
    }

    mutating func number(_ size: Int) -> Int? {
        guard size <= bytes.count - offset else { return nil }
        defer { offset += size }
        return (0..<size).reduce(0) { $0 << 8 | Int(bytes[offset + $1]) }
    }

    mutating func skipVector(lengthBytes: Int) -> Bool {
        guard let length = number(lengthBytes) else { return false }
        return skip(length)
    }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count <= bytes.count - offset else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }
}
