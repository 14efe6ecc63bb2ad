/// What a relay tells a client on the transport's own notice stream — a unidirectional stream the relay opens
/// (the application never sees it; the API offers bidirectional streams only), the same over QUIC and QMux.
///
/// One notice today, `move`: the relay is draining (a deploy, a rolling restart) and will close the connection
/// in `closingIn` milliseconds; the client should connect to another relay of the same name and switch over
/// before then. Wire form: the ASCII bytes `ptt-move`, then `closingIn` as 8 bytes big-endian (16 bytes, FIN).
package enum RelayNotice: Equatable, Sendable {
    case move(closingIn: UInt64)

    /// The most bytes a notice stream may carry (the client's stream-data limit for it).
    package static let maximumLength = 64

    private static let moveTag = Array("ptt-move".utf8)

    package func encoded() -> [UInt8] {
        switch self {
        case .move(let milliseconds):
            Self.moveTag + (0..<8).reversed().map { UInt8(truncatingIfNeeded: milliseconds >> (UInt64($0) * 8)) }
        }
    }

    /// The notice in a finished notice stream, nil for anything else (an unknown notice from a newer relay is
    /// ignored, not an error).
    package init?(decoding bytes: [UInt8]) {
        guard bytes.count == 16, Array(bytes.prefix(8)) == Self.moveTag else { return nil }
        self = .move(closingIn: bytes.dropFirst(8).reduce(0) { $0 << 8 | UInt64($1) })
    }
}
