import TransportCore

/// The QUIC version a client connection starts in: v1 (RFC 9000) or v2 (RFC 9369).
///
/// A relay built on ngtcp2 1.x accepts both; one on ngtcp2 0.12.1 speaks v1 only (it knows only a provisional v2
/// codepoint from the drafts) and answers a v2 Initial with Version Negotiation.
public enum QUICVersion: Hashable, Sendable, CustomStringConvertible {
    /// QUIC version 1 (RFC 9000), the default.
    case version1
    /// QUIC version 2 (RFC 9369): the same protocol under other codepoints, salts and labels, which keeps
    /// middleboxes from ossifying on v1's. Needs ngtcp2 1.0 or later (``isSupported``).
    case version2

    /// Whether the ngtcp2 this process runs on speaks this version; `connect` throws `invalidConfiguration` for
    /// one it does not.
    public var isSupported: Bool { self == .version1 || LinkedNgtcp2.supportsQUICVersion2 }

    /// "1" or "2".
    public var description: String { self == .version1 ? "1" : "2" }

    /// The version's wire codepoint.
    var wireValue: UInt32 { self == .version1 ? LinkedNgtcp2.quicVersion1 : LinkedNgtcp2.quicVersion2 }

    /// The version with this wire codepoint (nil: neither, e.g. before the handshake).
    init?(wireValue: UInt32) {
        switch wireValue {
        case LinkedNgtcp2.quicVersion1: self = .version1
        case LinkedNgtcp2.quicVersion2: self = .version2
        default: return nil
        }
    }
}
