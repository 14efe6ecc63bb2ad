/// A snapshot of a connection's counters and RTT estimates.
public struct ConnectionStatistics: Hashable, Sendable {
    /// The latest RTT sample.
    public var latestRTT: Duration
    /// The smoothed RTT (RFC 9002).
    public var smoothedRTT: Duration
    /// The smallest RTT seen.
    public var minimumRTT: Duration
    /// The congestion window in bytes.
    public var congestionWindow: UInt64
    /// Bytes sent and not yet acknowledged or declared lost.
    public var bytesInFlight: UInt64
    /// UDP datagrams written (each holds one or more coalesced QUIC packets, retransmissions included). Always 0
    /// over TCP, which has no packets of its own: see `bytesSent`.
    public var packetsSent: UInt64
    /// UDP datagrams received for this connection, before decryption (so undecryptable ones count). Always 0
    /// over TCP.
    public var packetsReceived: UInt64
    /// Bytes written: UDP payloads over QUIC, TLS records (ciphertext) over TCP.
    public var bytesSent: UInt64
    /// Bytes received: UDP payloads over QUIC, TLS records (ciphertext) over TCP.
    public var bytesReceived: UInt64
    /// Audio datagrams handed to the network.
    public var datagramsSent: UInt64
    /// Datagrams the peer acknowledged.
    public var datagramsAcknowledged: UInt64
    /// Datagrams declared lost (never retransmitted).
    public var datagramsLost: UInt64
    /// Datagrams dropped before sending because their deadline passed or the queue was full.
    public var datagramsExpired: UInt64
    /// Datagrams received.
    public var datagramsReceived: UInt64
    /// Received datagrams dropped because the application did not read them fast enough (oldest first).
    public var datagramsDropped: UInt64
    /// Outbound datagrams the peer could not take (too large for its limit) and that were discarded.
    public var datagramsRejected: UInt64
    /// TCP path: the ClientHello rode in the SYN (TCP Fast Open) and the server acknowledged it. Always false
    /// over QUIC.
    public var usedTCPFastOpen = false
    /// The local address (`host:port`) the connection sends from now; it changes when
    /// `TransportConnection.migrate(to:)` succeeds. Empty over TCP; on a server, the address its socket is bound to.
    public var localAddress = ""
    /// How many times `TransportConnection.migrate(to:)` moved this connection to a new path (the server answered
    /// there). Always 0 over TCP and on servers.
    public var migrations: UInt64 = 0
    /// How many key updates `TransportConnection.updateKeys()` started on this connection. Always 0 over TCP.
    public var keyUpdates: UInt64 = 0
    /// The QUIC version the connection speaks once the handshake settled it; nil over TCP.
    public var quicVersion: QUICVersion?

    package init(
        latestRTT: Duration = .zero, smoothedRTT: Duration = .zero, minimumRTT: Duration = .zero,
        congestionWindow: UInt64 = 0, bytesInFlight: UInt64 = 0, packetsSent: UInt64 = 0,
        packetsReceived: UInt64 = 0, bytesSent: UInt64 = 0, bytesReceived: UInt64 = 0,
        datagramsSent: UInt64 = 0, datagramsAcknowledged: UInt64 = 0, datagramsLost: UInt64 = 0,
        datagramsExpired: UInt64 = 0, datagramsReceived: UInt64 = 0, datagramsDropped: UInt64 = 0,
        datagramsRejected: UInt64 = 0, localAddress: String = "", migrations: UInt64 = 0, keyUpdates: UInt64 = 0
    ) {
        self.latestRTT = latestRTT
        self.smoothedRTT = smoothedRTT
        self.minimumRTT = minimumRTT
        self.congestionWindow = congestionWindow
        self.bytesInFlight = bytesInFlight
        self.packetsSent = packetsSent
        self.packetsReceived = packetsReceived
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.datagramsSent = datagramsSent
        self.datagramsAcknowledged = datagramsAcknowledged
        self.datagramsLost = datagramsLost
        self.datagramsExpired = datagramsExpired
        self.datagramsReceived = datagramsReceived
        self.datagramsDropped = datagramsDropped
        self.datagramsRejected = datagramsRejected
        self.localAddress = localAddress
        self.migrations = migrations
        self.keyUpdates = keyUpdates
    }
}
