import TransportCore

/// How a client connects: whom it trusts, which protocol it speaks, and its limits.
public struct ClientConfiguration: Sendable {
    /// The name the server's certificate must carry (DNS name, or IP address literal). Also sent as SNI.
    public var serverName: String
    /// The application protocol (ALPN) for QUIC; QMux derives its own from it.
    public var alpn: String
    /// The CAs that may vouch for the server. Certificates are always verified.
    public var trust: TrustRoots
    /// A QUIC connection that receives nothing for this long is closed.
    public var idleTimeout: Duration
    /// A handshake that takes longer fails with `handshakeTimeout`.
    public var handshakeTimeout: Duration
    /// Send a PING after this much silence (nil: never); keeps NAT bindings and idle timers alive.
    public var keepAliveInterval: Duration?
    /// The largest control message accepted or sent (default 64 KiB).
    public var maximumMessageSize: Int
    /// Received datagrams buffered for the application before the oldest are dropped.
    public var datagramReceiveBuffer: Int
    /// Outbound datagrams waiting for room in a packet before the oldest are dropped.
    public var datagramSendBuffer: Int
    /// Print ngtcp2's debug log to stderr.
    public var debugLogging: Bool
    /// Which transports to try: QUIC only, TCP (QMux) only, or QUIC raced against TCP.
    public var fallback: FallbackPolicy
    /// TCP Fast Open for the TCP path (`TCP_FASTOPEN_CONNECT`): once the kernel holds a cookie for the relay (it
    /// keeps it across process restarts), the ClientHello — and 0-RTT data — ride in the SYN, saving a round trip.
    /// The kernel falls back to a normal handshake by itself when the server or a middlebox refuses it.
    public var tcpFastOpen = true
    /// A GnuTLS priority string replacing the default policy (e.g. `TLSPolicy.chacha20Only` for the interop
    /// matrix's chacha20 case); nil keeps the default.
    package var tlsPriority: String? = nil

    /// A configuration for connecting to the server named `serverName`; every other setting has the default
    /// documented on its property (ALPN `ptt/1`, the system's CAs, QUIC raced against TCP after 250 ms).
    ///
    /// - Parameters:
    ///   - serverName: the name the server's certificate must carry, also sent as SNI.
    ///   - alpn: the application protocol; the server must offer the same one.
    ///   - trust: the CAs that may vouch for the server.
    ///   - idleTimeout: how long a connection may receive nothing before it is closed.
    ///   - handshakeTimeout: how long a handshake may take before `connect` fails with `handshakeTimeout`.
    ///   - keepAliveInterval: send a PING after this much silence; nil never does.
    ///   - maximumMessageSize: the largest control message accepted or sent, in bytes.
    ///   - datagramReceiveBuffer: received datagrams buffered before the oldest are dropped.
    ///   - datagramSendBuffer: outbound datagrams queued before the oldest are dropped.
    ///   - debugLogging: print ngtcp2's debug log to stderr.
    ///   - fallback: QUIC only, TCP only, or QUIC raced against TCP.
    public init(
        serverName: String, alpn: String = "ptt/1", trust: TrustRoots = .system,
        idleTimeout: Duration = .seconds(30), handshakeTimeout: Duration = .seconds(10),
        keepAliveInterval: Duration? = nil, maximumMessageSize: Int = 64 * 1024,
        datagramReceiveBuffer: Int = 256, datagramSendBuffer: Int = 256, debugLogging: Bool = false,
        fallback: FallbackPolicy = .race()
    ) {
        self.fallback = fallback
        self.serverName = serverName
        self.alpn = alpn
        self.trust = trust
        self.idleTimeout = idleTimeout
        self.handshakeTimeout = handshakeTimeout
        self.keepAliveInterval = keepAliveInterval
        self.maximumMessageSize = maximumMessageSize
        self.datagramReceiveBuffer = datagramReceiveBuffer
        self.datagramSendBuffer = datagramSendBuffer
        self.debugLogging = debugLogging
    }

    var quicParameters: QUICParameters {
        var parameters = QUICParameters(
            alpn: alpn, idleTimeout: idleTimeout, handshakeTimeout: handshakeTimeout,
            datagramSendBuffer: datagramSendBuffer, debugLogging: debugLogging)
        parameters.keepAliveInterval = keepAliveInterval?.nanoseconds
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
}

extension Duration {
    /// Whole nanoseconds, clamped at zero.
    var nanoseconds: UInt64 {
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
    init(
        alpn: String, idleTimeout: Duration, handshakeTimeout: Duration, datagramSendBuffer: Int,
        debugLogging: Bool
    ) {
        self.init()
        self.alpn = alpn
        self.idleTimeout = idleTimeout.nanoseconds
        self.handshakeTimeout = handshakeTimeout.nanoseconds
        self.datagramQueueCapacity = datagramSendBuffer
        self.debugLog = debugLogging
    }
}
