/// QUIC transport error codes (RFC 9000 §20.1) as QMux uses them. A struct rather than an enum so a peer's
/// CONNECTION_CLOSE carrying any code (including ones this library never sends) is still representable.
package struct QMuxTransportErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }

    static let noError = Self(rawValue: 0x00)
    static let internalError = Self(rawValue: 0x01)
    static let flowControlError = Self(rawValue: 0x03)
    static let streamLimitError = Self(rawValue: 0x04)
    static let streamStateError = Self(rawValue: 0x05)
    static let finalSizeError = Self(rawValue: 0x06)
    static let frameEncodingError = Self(rawValue: 0x07)
    static let transportParameterError = Self(rawValue: 0x08)
    static let protocolViolation = Self(rawValue: 0x0a)

    package var description: String {
        let name: String
        switch rawValue {
        case 0x00: name = "NO_ERROR"
        case 0x01: name = "INTERNAL_ERROR"
        case 0x03: name = "FLOW_CONTROL_ERROR"
        case 0x04: name = "STREAM_LIMIT_ERROR"
        case 0x05: name = "STREAM_STATE_ERROR"
        case 0x06: name = "FINAL_SIZE_ERROR"
        case 0x07: name = "FRAME_ENCODING_ERROR"
        case 0x08: name = "TRANSPORT_PARAMETER_ERROR"
        case 0x0a: name = "PROTOCOL_VIOLATION"
        default: name = "transport error"
        }
        return "\(name) (0x\(String(rawValue, radix: 16)))"
    }
}

/// Why a local request was refused. These never close the connection: the caller asked for something the
/// connection cannot do right now (or ever), and nothing was sent.
enum QMuxUsageError: Hashable, Sendable {
    /// The connection is closed (CONNECTION_CLOSE sent or received, idle timeout, transport gone).
    case connectionClosed
    /// The peer's stream limit (initial_max_streams_* / MAX_STREAMS) is reached, or its transport
    /// parameters have not arrived yet (§4.2: nothing that depends on them may be sent before).
    case streamLimitReached
    /// No such stream, or it is already closed and forgotten.
    case unknownStream
    /// The stream has no sending part here (a peer-initiated unidirectional stream), or it already sent
    /// FIN or RESET_STREAM.
    case streamNotWritable
    /// The stream has no receiving part here (a locally initiated unidirectional stream).
    case streamNotReadable
    /// DATAGRAM frames are not negotiated: one side did not advertise max_datagram_frame_size > 0, or the
    /// peer's transport parameters have not arrived yet.
    case datagramsNotNegotiated
    /// An empty datagram.
    case datagramEmpty
    /// The datagram's DATAGRAM frame would exceed the peer's max_datagram_frame_size or max_record_size.
    case datagramTooLarge
}

/// The one error type of the QMux layer: either a protocol error (the connection closed itself and queued a
/// CONNECTION_CLOSE carrying `transportCode`), or a refused local request (`usage`; the connection is fine).
package struct QMuxError: Error, Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        case transport(QMuxTransportErrorCode)
        case usage(QMuxUsageError)
    }

    var kind: Kind
    /// The frame type that triggered a transport error (the CONNECTION_CLOSE Frame Type field; 0 when none).
    var frameType: UInt64
    /// What happened, for logs and the CONNECTION_CLOSE reason phrase.
    var message: String

    init(_ code: QMuxTransportErrorCode, frameType: UInt64 = 0, _ message: String) {
        self.kind = .transport(code)
        self.frameType = frameType
        self.message = message
    }

    init(usage: QMuxUsageError, _ message: String) {
        self.kind = .usage(usage)
        self.frameType = 0
        self.message = message
    }

    /// The transport error code, or nil for a usage error.
    var transportCode: QMuxTransportErrorCode? {
        if case .transport(let code) = kind { return code }
        return nil
    }

    var usage: QMuxUsageError? {
        if case .usage(let usage) = kind { return usage }
        return nil
    }

    package var description: String {
        switch kind {
        case .transport(let code):
            return "QMux \(code), frame type 0x\(String(frameType, radix: 16)): \(message)"
        case .usage(let usage):
            return "QMux request refused (\(usage)): \(message)"
        }
    }
}
