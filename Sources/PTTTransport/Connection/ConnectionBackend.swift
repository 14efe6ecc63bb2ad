import TransportCore
import TransportIO

/// What a `TransportConnection` needs from the transport underneath: the one `ConnectionDriver`, with QUIC's pump
/// or QMux's (the protocol erases which). Every operation runs on the driver's event loop; these methods are safe
/// to call from any thread.
package protocol ConnectionBackend: AnyObject, Sendable {
    /// The event loop this connection lives on (a server's connections share the server's loop).
    var loop: EventLoop { get }
    /// Opens a bidirectional stream, waiting while the peer's stream limit is reached.
    func openStream() async throws -> IncomingStreamHandle
    /// Queues bytes (and FIN) on a stream; suspends while too much of the stream is unacknowledged.
    func write(stream: Int64, _ bytes: [UInt8], fin: Bool) async throws
    /// RESET_STREAM + STOP_SENDING.
    func reset(stream: Int64, code: UInt64)
    /// STOP_SENDING only.
    func stopSending(stream: Int64, code: UInt64)
    /// The application consumed bytes of a stream: extend the peer's credit.
    func consumed(stream: Int64, bytes: Int)
    /// Queues a datagram without suspending; validates it first.
    func sendDatagram(_ payload: [UInt8], deadline: UInt64) throws(TransportError)
    /// Routes received datagrams to `handler` on the event loop instead of the `datagrams` sequence.
    func setDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) async
    /// Loop thread only: `setDatagramHandler` without the hop, for a caller already on the connection's loop (a
    /// relay channel adding a member there installs its handler in the same turn).
    func installDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void)
    /// Loop thread, server, before the handshake completed: asks `handler` on the loop, for each of the peer's
    /// streams receiving early (0-RTT) bytes, who takes its messages first, until the handshake completes or the
    /// connection closes (see `EarlyStreamTap`). Nothing once the handshake completed.
    func installEarlyStreamHandler(_ handler: @escaping (IncomingStreamHandle) -> EarlyMessageTaker?)
    /// When the endpoint made this connection (MonotonicClock): a server's, in the loop turn its first flight
    /// arrived.
    var createdAt: UInt64 { get }
    /// The largest datagram payload that can be sent now (0: not negotiated).
    var maxDatagramPayloadSize: Int { get }
    /// Drops (and counts as expired) the queued datagrams `matches` picks that the transport has not taken yet:
    /// frames that lost their worth before they left (a pre-empted talker's audio). Any thread.
    @discardableResult
    func dropQueuedDatagrams(where matches: ([UInt8]) -> Bool) -> Int
    /// Datagrams queued and not yet written (a relay replaying a buffer keeps this short instead of overfilling
    /// the queue, whose oldest frames would be dropped).
    var datagramBacklog: Int { get }
    /// Closes with an application code; returns once the CONNECTION_CLOSE is on its way.
    func close(code: UInt64, reason: String) async
    /// Closes without waiting (used when the last reference to a connection goes away).
    func closeSoon(code: UInt64, reason: String)
    /// Asks the peer for a sign of life now (QUIC: one PING; QMux: one QX_PING); what it answers shows in the
    /// connection's `activity`. Nothing before the handshake completed or once closed.
    func probeLiveness()
    /// A snapshot of the counters.
    func statistics() async -> ConnectionStatistics
    /// Client over QUIC: moves the connection to a new local address (see `TransportConnection.migrate(to:)`);
    /// returns the new local address once the server answered there.
    func migrate(to local: SocketAddress) async throws -> String
    /// QUIC: starts a key update (see `TransportConnection.updateKeys()`).
    func updateKeys() async throws
    /// Client: the latest state to save for a fast reconnect (nil until a ticket arrived; always nil on servers).
    var resumptionState: ResumptionState? { get }
    /// How the connection used saved state: the client's outcome, or what the server saw (resumed, 0-RTT
    /// accepted); `.none` until known.
    var resumptionStatus: ResumptionStatus { get }
}

/// The receiving end of one stream, as the backend hands it to the public API. Copies share one inbox, so every
/// `TransportStream` made from them reads the same buffer and decoder.
package struct IncomingStreamHandle: Sendable {
    package let id: Int64
    let inbox: StreamInbox
}
