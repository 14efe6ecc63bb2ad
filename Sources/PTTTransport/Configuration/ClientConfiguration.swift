import TransportCore

/// How a client connects: whom it trusts, which protocol it speaks, and its limits.
@dynamicMemberLookup
public struct ClientConfiguration: Sendable {
    /// The settings a client and a relay share, stored once: read and written as this configuration's own
    /// (`configuration.idleTimeout`), documented on ``ConnectionSettings``.
    public var connection = ConnectionSettings()

    /// Reads and writes a setting of ``connection`` as this configuration's own.
    public subscript<Value>(dynamicMember setting: WritableKeyPath<ConnectionSettings, Value>) -> Value {
        get { connection[keyPath: setting] }
        set { connection[keyPath: setting] = newValue }
    }

    /// The name the server's certificate must carry (DNS name, or IP address literal). Also sent as SNI.
    public var serverName: String
    /// The CAs that may vouch for the server. Certificates are always verified.
    public var trust: TrustRoots
    /// After this much silence the client sends a keep-alive (nil: never); default 15 s.
    ///
    /// Why 15 s: carrier NATs drop an idle UDP mapping after as little as 30 s (RFC 4787 REQ-5 asks for at least
    /// 2 minutes, which many carriers do not honor), and a lost mapping means the relay's next packet, the
    /// next talk burst, never reaches the phone. 15 s is half the shortest common timeout, so one keep-alive
    /// can be lost (QUIC retransmits it after a probe timeout) and the mapping still holds. Received audio and
    /// control traffic (and the ACKs of what the phone sends) count: keep-alives only go on a quiet connection.
    ///
    /// How each path honors it: over QUIC, ngtcp2 sends a PING frame when no packet has arrived for the
    /// interval (`ngtcp2_conn_set_keep_alive_timeout`, from the handshake's confirmation on); over TCP (QMux),
    /// the connection sends a QX_PING when nothing was received for the interval, and closes with `idleTimeout`
    /// if that ping stays unanswered for a whole idle timeout (TCP NAT mappings live much longer, but the ping
    /// is also how a dead TCP path is noticed).
    ///
    /// Battery and data cost: each keep-alive is one small packet each way (about 70 bytes on the wire for a
    /// QUIC PING, as much for its ACK), so about 34 KB an hour. The real cost is the cellular radio: every keep-alive
    /// wakes it, and an LTE or 5G radio then stays in a high-power state for several seconds, so a 15 s
    /// interval keeps the radio from ever reaching its idle state. Keep a link up this way only while the app
    /// needs to hear the channel in real time (foreground, or a PushToTalk channel that is joined and active);
    /// otherwise let the OS suspend the app (`TransportLink.suspend()`) and wake it with a push. Set nil, or
    /// a longer interval for networks whose NATs are known to be patient, to trade that risk for battery.
    public var keepAliveInterval: Duration?
    /// Which transports to try: QUIC only, TCP (QMux) only, or QUIC raced against TCP.
    public var fallback: FallbackPolicy
    /// TCP Fast Open for the TCP path (`TCP_FASTOPEN_CONNECT`): once the kernel holds a cookie for the relay (it
    /// keeps it across process restarts), the ClientHello — and 0-RTT data — ride in the SYN, saving a round trip.
    /// The kernel falls back to a normal handshake by itself when the server or a middlebox refuses it.
    public var tcpFastOpen = true
    /// Addresses to use for a server instead of resolving its host name, as curl's `--resolve` does: `connect`
    /// to a `ServerAddress` that is a key here tries these numeric addresses (IPv4 or IPv6, no brackets), in this
    /// order, and asks no resolver. The name stays the server's identity: its certificate must carry
    /// `serverName`, and resumption state saved against any of these addresses wakes into any other.
    /// A value that is not a numeric address makes `connect` throw `invalidConfiguration`.
    public var resolve: [ServerAddress: [String]] = [:]
    /// How long an attempt to one of a server's addresses may go unanswered before the next address is tried
    /// beside it (RFC 8305's connection attempt delay; default 250 ms). An address that refuses at once (ICMP
    /// unreachable over UDP, a reset over TCP) is left at once; the first address to complete a handshake wins
    /// and the other attempts are cancelled. A name with one address never waits for this.
    public var addressAttemptDelay: Duration = .milliseconds(250)
    /// The QUIC version to pin connections to, or nil (the default) to negotiate.
    ///
    /// nil: a connection starts in v1 (or in the version of the resumption state's ticket, see
    /// ``ResumptionState/quicVersion``), offers v1 and v2, and moves to v2 when the relay prefers it: compatible
    /// version negotiation (RFC 9368), which costs no round trip. A relay on ngtcp2 1.x prefers v2; one on 0.12.1,
    /// or any v1-only server, keeps the connection in v1. On ngtcp2 0.12.1 the client offers v1 only. A connection
    /// that starts in v2 for its saved ticket and meets a server answering with Version Negotiation (a relay moved
    /// to a v1-only build) connects again at once in v1, with a full handshake; `resumptionDiagnostic` says so.
    ///
    /// ``QUICVersion/version1`` or ``QUICVersion/version2``: start in that version and offer no other (a v2-only
    /// connection exercises v2 from the first packet; a v1-only one stays in v1 at any relay). Saved resumption
    /// state from the other version then costs a full handshake. ``QUICVersion/version2`` needs ngtcp2 1.x: on
    /// 0.12.1 `connect` throws `invalidConfiguration` saying so (never a fallback to TCP).
    public var quicVersion: QUICVersion? = nil
    /// A GnuTLS priority string replacing the default policy (e.g. `TLSPolicy.chacha20Only` for the interop
    /// matrix's chacha20 case); nil keeps the default.
    package var tlsPriority: String? = nil

    /// A configuration for connecting to the server named `serverName`; every other setting has the default
    /// documented on its property (ALPN `ptt/1`, the system's CAs, QUIC raced against TCP after 250 ms, a
    /// keep-alive after 15 s of silence).
    ///
    /// - Parameters:
    ///   - serverName: the name the server's certificate must carry, also sent as SNI.
    ///   - alpn: the application protocol; the server must offer the same one.
    ///   - trust: the CAs that may vouch for the server.
    ///   - idleTimeout: how long a connection may receive nothing before it is closed.
    ///   - handshakeTimeout: how long a handshake may take before `connect` fails with `handshakeTimeout`.
    ///   - keepAliveInterval: send a keep-alive after this much silence (default 15 s); nil never does.
    ///   - maximumMessageSize: the largest control message accepted or sent, in bytes.
    ///   - datagramReceiveBuffer: received datagrams buffered before the oldest are dropped.
    ///   - datagramSendBuffer: outbound datagrams queued before the oldest are dropped.
    ///   - debugLogging: print ngtcp2's debug log to stderr.
    ///   - fallback: QUIC only, TCP only, or QUIC raced against TCP.
    public init(
        serverName: String, alpn: String = "ptt/1", trust: TrustRoots = .system,
        idleTimeout: Duration = .seconds(30), handshakeTimeout: Duration = .seconds(10),
        keepAliveInterval: Duration? = .seconds(15), maximumMessageSize: Int = 64 * 1024,
        datagramReceiveBuffer: Int = 256, datagramSendBuffer: Int = 256, debugLogging: Bool = false,
        fallback: FallbackPolicy = .race()
    ) {
        self.fallback = fallback
        self.serverName = serverName
        self.connection.alpn = alpn
        self.trust = trust
        self.connection.idleTimeout = idleTimeout
        self.connection.handshakeTimeout = handshakeTimeout
        self.keepAliveInterval = keepAliveInterval
        self.connection.maximumMessageSize = maximumMessageSize
        self.connection.datagramReceiveBuffer = datagramReceiveBuffer
        self.connection.datagramSendBuffer = datagramSendBuffer
        self.debugLogging = debugLogging
    }

    var quicParameters: QUICParameters {
        var parameters = QUICParameters(connection)
        parameters.keepAliveInterval = keepAliveInterval?.nanoseconds
        parameters.acceptsRelayNotices = true
        parameters.quicVersion = (quicVersion ?? .version1).wireValue
        parameters.negotiatesVersion = quicVersion == nil && LinkedNgtcp2.supportsQUICVersion2
        return parameters
    }
}

/// How a client chooses between QUIC and the TCP fallback (QMux over TLS 1.3).
public enum FallbackPolicy: Hashable, Sendable {
    /// QUIC over UDP only.
    case quicOnly
    /// QMux over TLS over TCP only.
    case tcpOnly
    /// Happy Eyeballs: start QUIC; start TCP too if the QUIC handshake has received nothing after `tcpAfter`,
    /// or at once when UDP gets an ICMP error; the first connection ready wins and the other is cancelled. When
    /// the saved state says TCP worked last time, both start at once. Certificate, name, ALPN and TLS-version
    /// failures on either path are final: they never trigger the fallback.
    case race(tcpAfter: Duration = .milliseconds(250))
}

/// A server's address, `host:port` with a numeric host (`127.0.0.1`, `::1`), or a host name resolved at connect.
public struct ServerAddress: Hashable, Sendable, CustomStringConvertible {
    /// A numeric IPv4 or IPv6 address (without brackets), or a host name resolved when connecting.
    public var host: String
    /// The UDP port for QUIC, and the TCP port for the fallback.
    public var port: UInt16

    /// The address `host` at `port`.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` or `[V6]:PORT`.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    /// `host:port`, with an IPv6 host in brackets (`[::1]:4433`): the form `init?(_:)` parses.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// A socket's numeric address (a server's bound address).
    init(bound address: SocketAddress) {
        self.init(host: address.host, port: address.port)
    }
}

extension Duration {
    /// Whole nanoseconds, clamped at zero.
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    init(nanoseconds: UInt64) {
        self = .nanoseconds(Int64(clamping: nanoseconds))
    }
}

extension QUICParameters {
    /// The settings client and server configurations share, in the core's units.
    init(_ settings: ConnectionSettings) {
        self.init()
        alpn = settings.alpn
        idleTimeout = settings.idleTimeout.nanoseconds
        handshakeTimeout = settings.handshakeTimeout.nanoseconds
        datagramQueueCapacity = settings.datagramSendBuffer
        debugLog = settings.debugLogging
        initialRTT = settings.initialRTT.nanoseconds
        qlog = QlogSafety.sinks(directory: settings.qlogDirectory)
    }
}
