/// What a `QMuxConnection` reports to its owner, in order, through `nextEvent()`.
package enum QMuxEvent: Hashable, Sendable {
    /// The peer's QX_TRANSPORT_PARAMETERS arrived (always the first event from the peer, §4.2).
    case peerParameters(QMuxTransportParameters)
    /// The peer opened a stream (explicitly, or implicitly by opening a higher-numbered one; RFC 9000 §3.2).
    case streamOpened(Int64)
    /// Bytes of a stream, in order; `fin` marks its end. Report consumption with `consumed(stream:bytes:)`.
    case streamData(Int64, [UInt8], fin: Bool)
    /// The peer abandoned sending on a stream (RESET_STREAM).
    case streamReset(Int64, code: UInt64)
    /// The peer asked us to stop sending (STOP_SENDING); the connection already answered with RESET_STREAM
    /// carrying the same code (RFC 9000 §3.5).
    case stopSending(Int64, code: UInt64)
    /// Both parts of a stream are finished (FIN or reset each way) and the connection forgot it: the owner can
    /// forget whatever it keeps for the stream too.
    case streamClosed(Int64)
    /// One DATAGRAM frame's payload.
    case datagram([UInt8])
    /// The peer answered a QX_PING this side sent with `ping()`, up to and including `sequence`.
    case pong(sequence: UInt64)
    /// The connection is over; nothing more will be reported or sent (after any output already queued).
    case closed(QMuxCloseReason)
}

/// How a connection ended. There is no draining period in QMux (§7): the owner closes the transport as soon
/// as the output queued with the close (if any) is written.
package enum QMuxCloseReason: Hashable, Sendable {
    /// `close(applicationError:reason:)` sent CONNECTION_CLOSE (type 0x1d).
    case localApplication(code: UInt64, reason: String)
    /// The peer sent CONNECTION_CLOSE type 0x1d.
    case peerApplication(code: UInt64, reason: String)
    /// This side found a protocol error and sent CONNECTION_CLOSE (type 0x1c) with its code.
    case localError(QMuxError)
    /// The peer sent CONNECTION_CLOSE type 0x1c.
    case peerError(code: QMuxTransportErrorCode, frameType: UInt64, reason: String)
    /// The idle timeout expired (or a QX_PING went unanswered for that long); nothing was sent (§7).
    case idleTimeout
    /// The underlying transport ended without a CONNECTION_CLOSE; `midRecord` when a record was cut short.
    case transportClosed(midRecord: Bool)
}
