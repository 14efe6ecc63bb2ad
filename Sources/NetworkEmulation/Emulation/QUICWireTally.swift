import TransportCore

/// What the emulated path saw of QUIC, from the cleartext parts of long headers only (types, connection IDs,
/// Retry and Initial tokens, lengths): the evidence the interop runner reads from its captures without keys.
/// Never decrypts; short-header (1-RTT) packets are only counted as bytes.
package struct QUICWireTally: Sendable, Hashable {
    /// Client Initial packets that reached the server.
    package var clientInitials = 0
    /// Server Initial packets sent.
    package var serverInitials = 0
    /// Source connection IDs of the server's Initials, in order of first appearance: one per handshake.
    package var serverConnectionIDs: [[UInt8]] = []
    /// Bytes of the server's Handshake packets, per server connection ID: a TLS Certificate message travels here.
    package var serverHandshakeBytes: [[UInt8]: Int] = [:]
    /// Retry packets the server sent, and their tokens.
    package var retryTokens: [[UInt8]] = []
    /// Client Initials that reached the server carrying a token a Retry gave out.
    package var clientInitialsWithRetryToken = 0
    /// Bytes of the client's 0-RTT packets that reached the server.
    package var clientZeroRTTBytes = 0
    /// Version Negotiation packets, either direction.
    package var versionNegotiations = 0
    /// Anti-amplification evidence for the first connection: UDP payload bytes the client got to the server, and
    /// that the server sent, before the first client Handshake packet reached the server (address validation; the
    /// datagram that carries it does not count).
    package var clientBytesBeforeValidation = 0
    /// See `clientBytesBeforeValidation`.
    package var serverBytesBeforeValidation = 0
    /// Whether a client Handshake packet has reached the server.
    package var validated = false
    /// Long-header packets by QUIC version (v1, or v2 of RFC 9369), client to server: a client that negotiates
    /// shows v1 Initials and then v2 packets once the server moved the connection (RFC 9368).
    package var clientPacketsByVersion: [UInt32: Int] = [:]
    /// See `clientPacketsByVersion`: the server's.
    package var serverPacketsByVersion: [UInt32: Int] = [:]
    /// The version of the first long-header packet the client got to the server (nil: none yet).
    package var clientFirstVersion: UInt32?

    /// The number of handshakes the server started (distinct connection IDs of its Initials).
    package var handshakes: Int { serverConnectionIDs.count }

    package init() {}

    /// Records a UDP payload the client got through to the server.
    package mutating func clientDelivered(_ payload: ArraySlice<UInt8>) {
        var sawHandshake = false
        Self.walk(payload) { packet in
            if packet.kind != .versionNegotiation {
                clientPacketsByVersion[packet.version, default: 0] += 1
                if clientFirstVersion == nil { clientFirstVersion = packet.version }
            }
            switch packet.kind {
            case .initial:
                clientInitials += 1
                if !packet.token.isEmpty && retryTokens.contains(Array(packet.token)) {
                    clientInitialsWithRetryToken += 1
                }
            case .zeroRTT: clientZeroRTTBytes += packet.length
            case .handshake: sawHandshake = true
            case .versionNegotiation: versionNegotiations += 1
            case .retry: break
            }
        }
        if sawHandshake { validated = true }
        if !validated { clientBytesBeforeValidation += payload.count }
    }

    /// Records a UDP payload the server sent towards the client (whether or not the path then dropped it).
    package mutating func serverSent(_ payload: ArraySlice<UInt8>) {
        if !validated { serverBytesBeforeValidation += payload.count }
        Self.walk(payload) { packet in
            if packet.kind != .versionNegotiation { serverPacketsByVersion[packet.version, default: 0] += 1 }
            switch packet.kind {
            case .initial:
                serverInitials += 1
                if !serverConnectionIDs.contains(packet.sourceID) { serverConnectionIDs.append(packet.sourceID) }
            case .handshake: serverHandshakeBytes[packet.sourceID, default: 0] += packet.length
            case .retry: retryTokens.append(Array(packet.token))
            case .versionNegotiation: versionNegotiations += 1
            case .zeroRTT: break
            }
        }
    }

    struct LongHeader {
        enum Kind { case initial, zeroRTT, handshake, retry, versionNegotiation }
        var kind: Kind
        /// The version field (0 for Version Negotiation).
        var version: UInt32 = 0
        var sourceID: [UInt8]
        var token: ArraySlice<UInt8>
        /// The whole packet's length on the wire.
        var length: Int
    }

    /// Calls `body` for each QUIC v1 or v2 long-header packet coalesced in `payload`; stops at a short header,
    /// another version or a malformed header.
    static func walk(_ payload: ArraySlice<UInt8>, _ body: (LongHeader) -> Void) {
        var offset = payload.startIndex
        while offset < payload.endIndex, let packet = longHeader(payload[offset...]) {
            body(packet)
            offset += packet.length
            if packet.kind == .retry || packet.kind == .versionNegotiation { return }
        }
    }

    static func longHeader(_ bytes: ArraySlice<UInt8>) -> LongHeader? {
        var reader = Reader(bytes: bytes)
        guard let first = reader.byte(), first & 0x80 != 0, let version = reader.take(4),
            let dcidLength = reader.byte(), reader.take(Int(dcidLength)) != nil,
            let scidLength = reader.byte(), let scid = reader.take(Int(scidLength))
        else { return nil }
        if version.allSatisfy({ $0 == 0 }) {
            return LongHeader(kind: .versionNegotiation, sourceID: Array(scid), token: [], length: bytes.count)
        }
        let number = version.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        // The two bits of the long packet type, per version: RFC 9000 §17.2, and RFC 9369 §3.2's new codepoints.
        guard let type = LongPacketType(firstByte: first, version: number) else { return nil }
        let kind: LongHeader.Kind =
            switch type {
            case .initial: .initial
            case .zeroRTT: .zeroRTT
            case .handshake: .handshake
            case .retry: .retry
            }
        if kind == .retry {
            guard bytes.count - reader.consumed >= 16 else { return nil }
            let token = bytes[(bytes.startIndex + reader.consumed)..<(bytes.endIndex - 16)]
            return LongHeader(kind: .retry, version: number, sourceID: Array(scid), token: token, length: bytes.count)
        }
        var token: ArraySlice<UInt8> = []
        if kind == .initial {
            guard let tokenLength = reader.varint(), let bytes = reader.take(Int(tokenLength)) else { return nil }
            token = bytes
        }
        guard let length = reader.varint(), reader.take(Int(length)) != nil else { return nil }
        return LongHeader(kind: kind, version: number, sourceID: Array(scid), token: token, length: reader.consumed)
    }

    /// QUIC v1's and v2's version fields.
    package static let versionOne = LongPacketType.versionOne
    package static let versionTwo = LongPacketType.versionTwo

    private struct Reader {
        let bytes: ArraySlice<UInt8>
        var consumed = 0

        mutating func byte() -> UInt8? { take(1)?.first }

        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, bytes.count - consumed >= count else { return nil }
            let start = bytes.startIndex + consumed
            consumed += count
            return bytes[start..<(start + count)]
        }

        mutating func varint() -> UInt64? {
            guard let first = byte() else { return nil }
            let extra = (1 << Int(first >> 6)) - 1
            guard let rest = take(extra) else { return nil }
            return rest.reduce(UInt64(first & 0x3f)) { $0 << 8 | UInt64($1) }
        }
    }
}
