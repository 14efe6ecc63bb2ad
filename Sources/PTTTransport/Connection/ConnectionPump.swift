import TransportCore
import TransportIO

/// The transport-specific half of a `ConnectionDriver`: the socket, and how the core's output reaches it. QUIC's
/// `UDPPacketPump` writes ngtcp2's packets into the loop's UDP send batch (paced, across a migration's paths);
/// QMux's `TLSStreamPump` frames stream writes into TLS records and writes them to a TCP socket as it takes them.
/// Everything here runs on the driver's loop.
protocol ConnectionPump: AnyObject, Sendable {
    associatedtype Core: CoreConnection
    /// The sans-IO connection the pump writes for.
    var core: Core { get }
    /// Writes what the core has ready to the socket (QMux first frames the datagrams waiting in
    /// `driver.outbound`; QUIC's core takes them from the same queue as it writes packets).
    func writeOutput(_ driver: ConnectionDriver<Self>)
    /// Takes a stream write the stream still accepts; resumes `continuation` once the bytes are the core's (QUIC:
    /// while the stream holds little unacknowledged; QMux: in order, under the connection's queued-bytes limit).
    func acceptWrite(
        _ driver: ConnectionDriver<Self>, stream: Int64, _ bytes: [UInt8], fin: Bool,
        _ continuation: CheckedContinuation<Void, any Error>)
    /// The core can take more bytes on stream `id`.
    func streamWritable(_ id: Int64, _ driver: ConnectionDriver<Self>)
    /// A path the core validated (QUIC: a migration's, or the peer's after a rebinding).
    func pathValidated(_ address: SocketAddress, succeeded: Bool, _ driver: ConnectionDriver<Self>)
    /// The connection ended: fails whatever waits on the transport (writes, a migration).
    func connectionWillFinish(_ error: TransportError)
    /// The connection closed: when to let it go (nil: now). QUIC's server answers with CONNECTION_CLOSE for its
    /// closing period; QMux waits, a bounded time, for its last bytes to leave.
    func closingDeadline(now: UInt64) -> UInt64?
    /// The connection is let go: closes what the pump owns (`closingTimedOut`: QMux's last bytes never left, so
    /// the TCP connection is reset).
    func release(closingTimedOut: Bool)
    /// Client: copies what the transport measured (RTT, version) into the state the next connection needs.
    func measure(into tracker: inout ResumptionTracker)
    /// A snapshot of the counters.
    func statistics(_ driver: ConnectionDriver<Self>) -> ConnectionStatistics
    /// Client over QUIC: moves to a new local address; returns it once the server answered there.
    func migrate(_ driver: ConnectionDriver<Self>, to local: SocketAddress) async throws -> String
    /// QUIC: starts a key update.
    func updateKeys(_ driver: ConnectionDriver<Self>) throws
}
