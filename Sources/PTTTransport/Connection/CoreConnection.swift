import TransportCore
import TransportIO

/// What the one connection driver asks of a sans-IO transport core, the operations that QUIC's `QUICConnection`
/// and QMux's `QMuxOverTLS` share: both emit the same `QUICEvent`s, and only their output (UDP packets, a TLS byte
/// stream) and their transport-specific extras differ.
protocol CoreConnection: AnyObject {
    /// Whether this end is the client.
    var isClient: Bool { get }
    /// Why the connection ended (nil while it is open).
    var closeReason: CloseReason? { get }
    /// The next event to hand to the application, in order.
    func nextEvent() -> QUICEvent?
    /// Opens a bidirectional stream: its ID, or nil while the peer's stream limit is reached.
    func openBidirectionalStream() throws(TransportError) -> Int64?
    /// Opens a unidirectional stream: its ID, or nil while the peer allows none.
    func openUnidirectionalStream() throws(TransportError) -> Int64?
    /// Queues bytes (and FIN) on a stream.
    func queue(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError)
    /// RESET_STREAM and STOP_SENDING: the stream is abandoned both ways.
    func abandon(stream: Int64, code: UInt64)
    /// STOP_SENDING only.
    func stopSending(_ stream: Int64, code: UInt64)
    /// The application consumed `bytes` of a stream: extend the peer's credit.
    func consumed(stream: Int64, bytes: Int)
    /// Closes with an application code.
    func close(code: UInt64, reason: String, now: UInt64)
    /// Asks the peer for a sign of life.
    func probeLiveness()
    /// The largest datagram payload the peer accepts now (0: not negotiated, or not known yet).
    var maxDatagramPayloadSize: Int { get }
    /// Client: whether the handshake resumed a session.
    var isResumed: Bool { get }
    /// Client: whether the server accepted 0-RTT data (nil: not attempted, or not known yet).
    var earlyDataAccepted: Bool? { get }
    /// Server: whether 0-RTT data from the client was accepted.
    var acceptedEarlyData: Bool { get }
    /// The peer's transport parameters as received, to remember for 0-RTT.
    var encodedPeerTransportParameters: [UInt8] { get }
}

extension QUICConnection: CoreConnection {
    var isClient: Bool { role == .client }

    func queue(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError) {
        try write(stream: stream, bytes, fin: fin)
    }

    /// ngtcp2's `shutdown_stream` already stops both directions.
    func abandon(stream: Int64, code: UInt64) { resetStream(stream, code: code) }

    func consumed(stream: Int64, bytes: Int) { extendCredit(stream: stream, by: bytes) }
}

extension QMuxOverTLS: CoreConnection {
    func queue(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError) {
        try write(stream: stream, bytes, fin: fin)
    }

    /// As QUIC's `ngtcp2_conn_shutdown_stream`: the inbox is dropped with its unread bytes, so the receiving part
    /// is abandoned too (returning their connection credit, and that of whatever the peer still sends).
    func abandon(stream: Int64, code: UInt64) {
        resetStream(stream, code: code)
        stopSending(stream, code: code)
    }
}
