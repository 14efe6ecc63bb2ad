/// The wire format of a client's saved resumption state: versioned, self-describing, checksummed.
///
/// Layout: magic `PTTR`, a version byte (1), then fields as (varint type, varint length, bytes) in any order, then
/// a 4-byte FNV-1a checksum of everything before it. Unknown field types are skipped, so later versions can add
/// fields; a different version byte is refused. Decoding never traps: every failure is a `TransportError` with
/// code `resumptionStateUnusable` that says what was wrong.
package struct ResumptionBlob: Hashable, Sendable {
    package static let magic: [UInt8] = Array("PTTR".utf8)
    package static let version: UInt8 = 1
    /// Blobs larger than this are refused outright (a ticket is a few hundred bytes).
    package static let maximumSize = 64 * 1024

    package var host: String = ""
    package var port: UInt16 = 0
    package var alpn: String = ""
    /// The transport that last worked: "quic" or "tcp".
    package var lastTransport: String = "quic"
    /// Seconds since the Unix epoch.
    package var createdAt: UInt64 = 0
    package var expiresAt: UInt64 = 0
    package var quicTicket: [UInt8] = []
    package var quicTransportParameters: [UInt8] = []
    package var quicToken: [UInt8] = []
    package var smoothedRTT: UInt64 = 0
    package var tcpTicket: [UInt8] = []
    /// The server's QMux transport parameters (QX_TRANSPORT_PARAMETERS payload), remembered for 0-RTT over TCP.
    package var tcpTransportParameters: [UInt8] = []
    /// The QUIC version (wire codepoint) of the connection that issued `quicTicket` and `quicToken`: the next
    /// connection starts in it. Blobs written before this field existed say nothing, which means v1.
    /// Only v1 and v2 (RFC 9369) decode.
    package var quicVersion: UInt32 = LinkedNgtcp2.quicVersion1

    package init() {}

    private enum Field: UInt64 {
        case host = 1
        case port, alpn, lastTransport, createdAt, expiresAt, quicTicket, quicTransportParameters,
            quicToken, smoothedRTT, tcpTicket, tcpTransportParameters, quicVersion
    }

    package func encoded() -> [UInt8] {
        var bytes = Self.magic + [Self.version]
        func put(_ field: Field, _ value: [UInt8]) {
            VarInt.encode(field.rawValue, into: &bytes)
            VarInt.encode(UInt64(value.count), into: &bytes)
            bytes += value
        }
        func putNumber(_ field: Field, _ value: UInt64) {
            var number: [UInt8] = []
            VarInt.encode(min(value, VarInt.max), into: &number)
            put(field, number)
        }
        put(.host, Array(host.utf8))
        putNumber(.port, UInt64(port))
        put(.alpn, Array(alpn.utf8))
        put(.lastTransport, Array(lastTransport.utf8))
        putNumber(.createdAt, createdAt)
        putNumber(.expiresAt, expiresAt)
        if !quicTicket.isEmpty { put(.quicTicket, quicTicket) }
        if !quicTransportParameters.isEmpty { put(.quicTransportParameters, quicTransportParameters) }
        if !quicToken.isEmpty { put(.quicToken, quicToken) }
        putNumber(.smoothedRTT, smoothedRTT)
        if !tcpTicket.isEmpty { put(.tcpTicket, tcpTicket) }
        if !tcpTransportParameters.isEmpty { put(.tcpTransportParameters, tcpTransportParameters) }
        if quicVersion != LinkedNgtcp2.quicVersion1 { putNumber(.quicVersion, UInt64(quicVersion)) }  // v1 as before
        let checksum = Self.fnv1a(bytes)
        bytes += [
            UInt8(checksum >> 24), UInt8((checksum >> 16) & 0xff), UInt8((checksum >> 8) & 0xff),
            UInt8(checksum & 0xff),
        ]
        return bytes
    }

    package init(decoding bytes: [UInt8]) throws(TransportError) {
        func unusable(_ why: String) -> TransportError {
            TransportError(.resumptionStateUnusable, "the saved resumption state is unusable: \(why)")
        }
        guard bytes.count <= Self.maximumSize else { throw unusable("it is \(bytes.count) bytes, too large") }
        guard bytes.count >= Self.magic.count + 1 + 4, Array(bytes.prefix(4)) == Self.magic else {
            throw unusable("it is not a PTTTransport resumption state (bad magic or truncated)")
        }
        guard bytes[4] == Self.version else {
            throw unusable("version \(bytes[4]) is not supported (this build reads version \(Self.version))")
        }
        let body = bytes.prefix(bytes.count - 4)
        let stored = bytes.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard Self.fnv1a(Array(body)) == stored else { throw unusable("the checksum does not match (corrupted)") }
        var index = 5
        var seen = Set<UInt64>()
        while index < body.count {
            guard let (type, typeLength) = VarInt.decode(body, at: index) else { throw unusable("truncated field") }
            index += typeLength
            guard let (length, lengthLength) = VarInt.decode(body, at: index) else {
                throw unusable("truncated field length")
            }
            index += lengthLength
            guard length <= UInt64(body.count - index) else { throw unusable("a field runs past the end") }
            let value = Array(body[index..<(index + Int(length))])
            index += Int(length)
            guard seen.insert(type).inserted else { throw unusable("field \(type) appears twice") }
            guard let field = Field(rawValue: type) else { continue }  // from a later version: skip
            func number() throws(TransportError) -> UInt64 {
                guard let (decoded, used) = VarInt.decode(value, at: 0), used == value.count else {
                    throw unusable("field \(type) is not a number")
                }
                return decoded
            }
            switch field {
            case .host: host = String(decoding: value, as: UTF8.self)
            case .port:
                let value = try number()
                guard value <= UInt64(UInt16.max) else { throw unusable("port \(value) out of range") }
                port = UInt16(value)
            case .alpn: alpn = String(decoding: value, as: UTF8.self)
            case .lastTransport: lastTransport = String(decoding: value, as: UTF8.self)
            case .createdAt: createdAt = try number()
            case .expiresAt: expiresAt = try number()
            case .quicTicket: quicTicket = value
            case .quicTransportParameters: quicTransportParameters = value
            case .quicToken: quicToken = value
            case .smoothedRTT: smoothedRTT = try number()
            case .tcpTicket: tcpTicket = value
            case .tcpTransportParameters: tcpTransportParameters = value
            case .quicVersion:
                let value = try number()
                guard value == UInt64(LinkedNgtcp2.quicVersion1) || value == UInt64(LinkedNgtcp2.quicVersion2) else {
                    throw unusable("QUIC version 0x\(String(value, radix: 16)) is neither v1 nor v2")
                }
                quicVersion = UInt32(value)
            }
        }
        guard !host.isEmpty, port != 0, !alpn.isEmpty else { throw unusable("it does not say which server it is for") }
        guard lastTransport == "quic" || lastTransport == "tcp" else {
            throw unusable("unknown transport \(lastTransport)")
        }
    }

    /// 32-bit FNV-1a: detects corruption (not an integrity check against an attacker; the ticket itself is
    /// authenticated by the server).
    static func fnv1a(_ bytes: [UInt8]) -> UInt32 {
        var hash: UInt32 = 0x811c_9dc5
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }
}
