/// The type of a QUIC long-header packet, which its version numbers: the two type bits (0x30 of the first byte) are
/// Initial 0b00, 0-RTT 0b01, Handshake 0b10, Retry 0b11 in QUIC v1 (RFC 9000 §17.2), and Retry 0b00, Initial 0b01,
/// 0-RTT 0b10, Handshake 0b11 in QUIC v2 (RFC 9369 §3.2). Every reader of a long header goes through here, so none
/// mistakes a v2 0-RTT packet (0b10) for a v1 Handshake one.
package enum LongPacketType: Sendable, Equatable {
    case initial
    case zeroRTT
    case handshake
    case retry

    /// The version fields of QUIC v1 and v2 on the wire.
    package static let versionOne: UInt32 = 0x0000_0001
    package static let versionTwo: UInt32 = 0x6b33_43cf

    /// The type the bits `(first >> 4) & 3` name in `version`; nil for a version whose types are not known here
    /// (0: Version Negotiation; any other version).
    package init?(firstByte first: UInt8, version: UInt32) {
        let bits = Int(first >> 4) & 3
        switch version {
        case Self.versionOne: self = [.initial, .zeroRTT, .handshake, .retry][bits]
        case Self.versionTwo: self = [.retry, .initial, .zeroRTT, .handshake][bits]
        default: return nil
        }
    }

    /// The type of the long-header packet at the start of `packet`; nil for a short header, a packet too short to
    /// hold the version, or a version whose types are not known here.
    package init?(packet: UnsafeRawBufferPointer) {
        guard packet.count >= 5, packet[0] & 0x80 != 0 else { return nil }
        let version = (1...4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[$1]) }
        self.init(firstByte: packet[0], version: version)
    }

    /// Whether the packet's destination connection ID is one the server chose (Handshake; Retry, which only a
    /// server sends), rather than one the client picked (Initial, 0-RTT).
    package var carriesServerChosenID: Bool { self == .handshake || self == .retry }
}
