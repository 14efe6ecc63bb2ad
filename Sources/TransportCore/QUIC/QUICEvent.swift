/// Why a connection ended. Delivered once, as the last status of every connection.
public enum CloseReason: Hashable, Sendable, CustomStringConvertible {
    /// This side closed with an application error code (0 = normal) and a reason phrase.
    case local(code: UInt64, reason: String)
    /// The peer closed with an application error code and a reason phrase.
    case peer(code: UInt64, reason: String)
    /// No packet arrived within the idle timeout.
    case idleTimeout
    /// The connection failed; the error says why and what to do.
    case failed(TransportError)

    /// A short phrase for logs: `closed locally (code 0)`, `closed by peer (code 7, busy)`, `idle timeout`,
    /// `failed: <error>`.
    public var description: String {
        switch self {
        case .local(let code, let reason): return "closed locally (code \(code)\(reason.isEmpty ? "" : ", \(reason)"))"
        case .peer(let code, let reason): return "closed by peer (code \(code)\(reason.isEmpty ? "" : ", \(reason)"))"
        case .idleTimeout: return "idle timeout"
        case .failed(let error): return "failed: \(error)"
        }
    }

    /// The error to hand to operations still waiting when the connection ends.
    package var error: TransportError {
        switch self {
        case .failed(let error): return error
        case .idleTimeout: return TransportError(.idleTimeout, "the connection was idle longer than its idle timeout")
        case .peer(let code, let reason):
            return TransportError(
                .closedByPeer, "the peer closed the connection: \(reason.isEmpty ? "no reason" : reason)",
                applicationErrorCode: code)
        case .local(let code, let reason):
            return TransportError(
                .connectionClosed, "the connection was closed by this side\(reason.isEmpty ? "" : ": \(reason)")",
                applicationErrorCode: code)
        }
    }
}

/// What a connection reports to its owner after each input. The core records events; the owner drains them
/// with `QUICConnection.nextEvent()` and never re-enters ngtcp2 from inside a callback.
package enum QUICEvent: Sendable {
    /// The TLS handshake finished (server: Finished received; client: Finished sent).
    case handshakeCompleted
    /// The peer opened a bidirectional stream.
    case streamOpened(Int64)
    /// Bytes arrived on a stream, in order; `fin` marks its end. `isEarly` is true for 0-RTT data.
    case streamData(Int64, [UInt8], fin: Bool, isEarly: Bool)
    /// The peer reset the stream (RESET_STREAM) with an application code.
    case streamReset(Int64, code: UInt64)
    /// The peer asked us to stop sending on the stream (STOP_SENDING).
    case stopSending(Int64, code: UInt64)
    /// Both directions of the stream are done; its state is gone.
    case streamClosed(Int64)
    /// Acknowledgements freed send buffer space on the stream.
    case streamWritable(Int64)
    /// The peer raised its stream limit: blocked `openBidirectionalStream` calls may retry.
    case streamsAvailable
    /// A DATAGRAM frame arrived. `isEarly` is true for 0-RTT.
    case datagram([UInt8], isEarly: Bool)
    /// The server sent an address-validation token for the next connection (client only).
    case newToken([UInt8])
    /// The server sent a session ticket: fresh resumption data (client only).
    case sessionTicket([UInt8])
    /// The server rejected 0-RTT: early stream data was discarded and must be resent (client only).
    case earlyDataRejected
    /// ngtcp2 finished validating a new path to the peer (after a NAT rebinding or a migration): whether the peer
    /// answered there. A failed one leaves the connection on its previous, validated path.
    case pathValidated(remote: SocketAddress, succeeded: Bool)
    /// The connection ended; no further events follow.
    case closed(CloseReason)
}
