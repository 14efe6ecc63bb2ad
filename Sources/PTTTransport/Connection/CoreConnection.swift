import TransportCore
import TransportIO

/// What the one connection driver asks of a sans-IO transport core: the operations that QUIC's `QUICConnection`
/// and QMux's `QMuxOverTLS` share. Both emit the same `QUICEvent`s; only their output (UDP packets, a TLS byte
/// stream) differs, and that is the pump's (`ConnectionPump`).
protocol CoreConnection: AnyObject {
    /// Whether this end is the client.
    var isClient: Bool { get }
    /// Why the connection ended (nil while it is open).
    var closeReason: CloseReason? { get }
    /// Whether the connection ended (`closeReason` is set), without copying the reason.
    var isClosed: Bool { get }
    /// Whether the handshake completed (QMux: TLS done and the peer's parameters read).
    var isHandshakeCompleted: Bool { get }
    /// When the peer was last heard from (monotonic nanoseconds).
    var lastHeard: UInt64 { get }
    /// The next deadline the core wants `handleTimeout` called at (nil: none).
    var nextTimeout: UInt64? { get }
    /// Runs whatever timer is due at `now`.
    func handleTimeout(now: UInt64)
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
    /// Queues a datagram frame now (the driver's `DatagramQueue` already validated and timed it).
    func queueDatagram(_ payload: [UInt8]) throws(TransportError)
    /// Counts a datagram the application gave that the core could not take (too large, not negotiated).
    func noteDatagramRejected()
    /// Client: whether what the driver queues before the first packet rides as 0-RTT data (QUIC, a resumed session
    /// that allows early data). QMux's early bytes are fixed when its core is made (`earlyStreamID`).
    var acceptsEarlyWrites: Bool { get }
    /// Client: the stream the core already carries the replay-safe early messages on (QMux: TLS early data sent
    /// with the ClientHello); nil when the driver opens the early stream itself or none went.
    var earlyStreamID: Int64? { get }
    /// Client: why saved state was ignored or only partly used (nil: used as it was, or nothing to say).
    var resumptionDiagnostic: String? { get }
    /// Client: whether the handshake resumed a session.
    var isResumed: Bool { get }
    /// Client: whether the server accepted 0-RTT data (nil: not attempted, or not known yet).
    var earlyDataAccepted: Bool? { get }
    /// Server: whether 0-RTT data from the client was accepted.
    var acceptedEarlyData: Bool { get }
    /// The peer's transport parameters as received, to remember for 0-RTT.
    var encodedPeerTransportParameters: [UInt8] { get }
}

extension CoreConnection {
    /// Client: queues a datagram the application gave before the handshake; one the core cannot take is counted
    /// as rejected.
    func sendEarlyDatagram(_ payload: [UInt8]) {
        do {
            try queueDatagram(payload)
        } catch {
            noteDatagramRejected()
        }
    }
}

extension QUICConnection: CoreConnection {
    var isClient: Bool { role == .client }

    var lastHeard: UInt64 { lastPacketRead }

    var acceptsEarlyWrites: Bool { earlyDataAttempted }

    /// QUIC's early stream is opened by the driver, in the first flight's 0-RTT packets.
    var earlyStreamID: Int64? { nil }

    func queue(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError) {
        try write(stream: stream, bytes, fin: fin)
    }

    /// ngtcp2's `shutdown_stream` already stops both directions.
    func abandon(stream: Int64, code: UInt64) { resetStream(stream, code: code) }

    func consumed(stream: Int64, bytes: Int) { extendCredit(stream: stream, by: bytes) }

    func queueDatagram(_ payload: [UInt8]) throws(TransportError) { try sendDatagram(payload) }
}

extension QMuxOverTLS: CoreConnection {
    var isClosed: Bool { closeReason != nil }

    var isHandshakeCompleted: Bool { isReady }

    var lastHeard: UInt64 { lastFrameRead }

    var acceptsEarlyWrites: Bool { false }

    /// QMux reports nothing of its own: the client's diagnostic comes from reading the saved state.
    var resumptionDiagnostic: String? { nil }

    func queue(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError) {
        try write(stream: stream, bytes, fin: fin)
    }

    /// As QUIC's `ngtcp2_conn_shutdown_stream`: the inbox is dropped with its unread bytes, so the receiving part
    /// is abandoned too (returning their connection credit, and that of whatever the peer still sends).
    func abandon(stream: Int64, code: UInt64) {
        resetStream(stream, code: code)
        stopSending(stream, code: code)
    }

    func queueDatagram(_ payload: [UInt8]) throws(TransportError) { try sendDatagram(payload) }
}
