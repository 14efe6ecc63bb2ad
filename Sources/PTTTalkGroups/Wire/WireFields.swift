import TransportCore

/// The field list every talk-group control message and wake ticket carries after its type: a sequence of
/// (varint key, varint length, value) triples, each key at most once, in any order. A reader skips keys it does not
/// know, so a newer phone or relay may add fields (issue 33's priority and emergency flags are such fields).
///
/// Values are one of four forms, fixed per key: a UTF-8 string, raw bytes, an unsigned integer (one QUIC varint
/// filling the value exactly), or a 64-bit identifier (8 bytes, big-endian).
package struct WireFields: Equatable, Sendable {
    /// The fields, by key.
    package private(set) var values: [UInt64: [UInt8]] = [:]

    package init() {}

    /// Parses a field list filling `bytes` from `offset` to the end.
    ///
    /// - Throws: `talkGroupMalformed` for a truncated triple, a repeated key, or a length running past the end.
    package init(parsing bytes: ArraySlice<UInt8>) throws(TransportError) {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard let (key, keyLength) = VarInt.decode(bytes, at: index) else {
                throw Self.malformed("a field key runs past the end of the message")
            }
            index += keyLength
            guard let (length, lengthLength) = VarInt.decode(bytes, at: index) else {
                throw Self.malformed("the length of field \(key) runs past the end of the message")
            }
            index += lengthLength
            guard length <= UInt64(bytes.endIndex - index) else {
                throw Self.malformed("field \(key) claims \(length) bytes; \(bytes.endIndex - index) remain")
            }
            let end = index + Int(length)
            guard values[key] == nil else { throw Self.malformed("field \(key) appears twice") }
            values[key] = Array(bytes[index..<end])
            index = end
        }
    }

    /// The encoded triples, keys in ascending order (so equal field sets encode alike).
    package func encoded(into bytes: inout [UInt8]) {
        for key in values.keys.sorted() {
            let value = values[key]!
            VarInt.encode(key, into: &bytes)
            VarInt.encode(UInt64(value.count), into: &bytes)
            bytes.append(contentsOf: value)
        }
    }

    // MARK: - Writing

    package mutating func set(_ key: UInt64, bytes value: [UInt8]) { values[key] = value }

    package mutating func set(_ key: UInt64, string value: String) { values[key] = Array(value.utf8) }

    package mutating func set(_ key: UInt64, uint value: UInt64) {
        var bytes: [UInt8] = []
        VarInt.encode(min(value, VarInt.max), into: &bytes)
        values[key] = bytes
    }

    package mutating func set(_ key: UInt64, id value: UInt64) {
        values[key] = (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (UInt64($0) * 8)) }
    }

    // MARK: - Reading

    /// Raw bytes of `key`, at most `limit` of them; nil when absent.
    package func bytes(_ key: UInt64, name: String, limit: Int) throws(TransportError) -> [UInt8]? {
        guard let value = values[key] else { return nil }
        guard value.count <= limit else {
            throw Self.malformed("\(name) is \(value.count) bytes; at most \(limit) are allowed")
        }
        return value
    }

    /// A UTF-8 string of at most `limit` bytes; nil when absent.
    package func string(_ key: UInt64, name: String, limit: Int) throws(TransportError) -> String? {
        guard let value = try bytes(key, name: name, limit: limit) else { return nil }
        guard let text = String(validating: value, as: UTF8.self) else {
            throw Self.malformed("\(name) is not UTF-8")
        }
        return text
    }

    /// An unsigned integer (one varint filling the value); nil when absent.
    package func uint(_ key: UInt64, name: String) throws(TransportError) -> UInt64? {
        guard let value = values[key] else { return nil }
        guard let (number, length) = VarInt.decode(value, at: 0), length == value.count else {
            throw Self.malformed("\(name) is not one variable-length integer")
        }
        return number
    }

    /// A 64-bit identifier (8 bytes big-endian); nil when absent.
    package func id(_ key: UInt64, name: String) throws(TransportError) -> UInt64? {
        guard let value = values[key] else { return nil }
        guard value.count == 8 else { throw Self.malformed("\(name) is \(value.count) bytes, not 8") }
        return value.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A field that must be present.
    package static func required<Value>(_ value: Value?, _ name: String) throws(TransportError) -> Value {
        guard let value else { throw malformed("\(name) is missing") }
        return value
    }

    package static func malformed(_ what: String) -> TransportError {
        TransportError(.talkGroupMalformed, "\(what); see the talk-group wire format (TalkGroupProtocol)")
    }
}
