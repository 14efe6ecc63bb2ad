internal import CNgtcp2
internal import CTransportShims

/// The knobs of one QUIC connection, in the core's units (nanoseconds, bytes). The public configuration
/// types translate into this; the defaults here are the library's defaults.
package struct QUICParameters: Sendable {
    package var alpn: String = "ptt/1"
    /// Server: further application protocols accepted beside `alpn` (a relay's trunks on its phones' port); the
    /// connection's `negotiatedALPN` says which one a client chose.
    package var additionalALPNs: [String] = []
    package var idleTimeout: UInt64 = 30 * nanosecondsPerSecond
    package var handshakeTimeout: UInt64 = 10 * nanosecondsPerSecond
    /// Send a PING after this much silence (nil: never). Keeps NAT bindings and the idle timer alive.
    package var keepAliveInterval: UInt64? = nil
    /// Client: let the relay open one unidirectional stream, for a `RelayNotice` (a relay accepts none).
    package var acceptsRelayNotices = false
    /// The largest DATAGRAM frame we accept (0 disables datagrams).
    package var maxDatagramFrameSize: UInt64 = 1200
    package var initialMaxData: UInt64 = 4 * 1024 * 1024
    package var initialMaxStreamData: UInt64 = 1024 * 1024
    package var maxBidirectionalStreams: UInt64 = 100
    /// How far ngtcp2 may auto-tune the receive windows beyond their initial size (1: never; see `ReceiveBudget`).
    package var windowGrowth: UInt64 = 4
    /// The first RTT estimate (nil: ngtcp2's 333 ms). Seeded from the last connection when resuming.
    package var initialRTT: UInt64? = nil
    /// Makes each connection's qlog sink (nil: no qlog). Whoever sets it checks first that the linked ngtcp2 may
    /// log qlog safely (PTTTransport's `QlogSafety`: CVE-2026-40170).
    package var qlog: QlogSinkFactory? = nil
    /// The largest UDP payload we send (PMTUD probes up to it).
    package var maxUDPPayloadSize: Int = 1452
    /// Outbound datagrams waiting for room; the oldest is dropped beyond this.
    package var datagramQueueCapacity: Int = 256
    /// Print ngtcp2's log to stderr.
    package var debugLog = false
    /// Client: the QUIC version the connection starts in (`PTT_QUIC_V1` or `PTT_QUIC_V2`).
    package var quicVersion = UInt32(PTT_QUIC_V1)
    /// Client: also offer the other version (compatible version negotiation, RFC 9368), so a relay that prefers it
    /// moves the connection there; false offers `quicVersion` only. Server: prefer v2, moving a client that starts
    /// in v1 and offers v2 there; false keeps every client in the version it started in. No effect where ngtcp2
    /// lacks v2 (0.12.1).
    package var negotiatesVersion = false
    /// The random bytes of connection IDs, reset tokens of connections without a reset secret, stateless resets
    /// and ngtcp2's `rand` callback: the kernel's generator unless a reproducible test injects a seeded one. TLS
    /// (key shares, the client random) and ngtcp2's token nonces draw from GnuTLS' generator whatever this is.
    package var random: any RandomSource = SystemRandom()

    package init() {}

    /// Rejects values that would overflow inside ngtcp2 or make no sense.
    package func validate() throws(TransportError) {
        let day = 86_400 * nanosecondsPerSecond
        guard idleTimeout > 0, idleTimeout <= day else {
            throw TransportError(.invalidConfiguration, "idle timeout must be between 0 and 24 h")
        }
        guard handshakeTimeout > 0, handshakeTimeout <= day else {
            throw TransportError(.invalidConfiguration, "handshake timeout must be between 0 and 24 h")
        }
        guard !alpn.isEmpty, alpn.utf8.count <= 255 else {
            throw TransportError(.invalidConfiguration, "ALPN must be 1 to 255 bytes")
        }
        for other in additionalALPNs {
            guard !other.isEmpty, other.utf8.count <= 255, other != alpn else {
                throw TransportError(
                    .invalidConfiguration, "each additional ALPN must be 1 to 255 bytes and differ from \(alpn)")
            }
        }
        guard maxDatagramFrameSize <= 65535 else {
            throw TransportError(.invalidConfiguration, "max datagram frame size must be at most 65535")
        }
        guard (1200...65527).contains(maxUDPPayloadSize) else {
            throw TransportError(.invalidConfiguration, "max UDP payload must be between 1200 and 65527 bytes")
        }
        guard maxBidirectionalStreams > 0, maxBidirectionalStreams < (1 << 60) else {
            throw TransportError(.invalidConfiguration, "max bidirectional streams must be positive")
        }
        if let initialRTT, !Self.initialRTTRange.contains(initialRTT) {
            throw TransportError(
                .invalidConfiguration,
                "the initial RTT must be between 1 ms and 10 s, not \(initialRTT / nanosecondsPerMillisecond) ms "
                    + "(\(initialRTT) ns); 100 ms suits mobile networks")
        }
        guard quicVersion == UInt32(PTT_QUIC_V1) || quicVersion == UInt32(PTT_QUIC_V2) else {
            throw TransportError(.invalidConfiguration, "the QUIC version must be 1 or 2")
        }
        if quicVersion == UInt32(PTT_QUIC_V2), !LinkedNgtcp2.supportsQUICVersion2 {
            throw TransportError(
                .invalidConfiguration,
                "QUIC v2 (RFC 9369) needs ngtcp2 1.0 or later; this process runs ngtcp2 \(LinkedNgtcp2.version), "
                    + "which knows only a provisional v2 codepoint from the drafts: use QUIC v1, or build against "
                    + "ngtcp2 1.x (Debian 13, or bookworm-backports)")
        }
    }

    /// `isServer`: a server accepts every version the library speaks and keeps the client in `clientVersion` (the
    /// version of its Initial), or moves it to v2 with `negotiatesVersion`; a client starts in `quicVersion` and,
    /// with `negotiatesVersion`, offers both.
    func settings(now: UInt64, isServer: Bool = false, clientVersion: UInt32? = nil) -> ngtcp2_settings {
        var settings = ngtcp2_settings()
        ptt_settings_default(&settings)
        settings.initial_ts = now
        settings.cc_algo = NGTCP2_CC_ALGO_CUBIC
        settings.max_tx_udp_payload_size = maxUDPPayloadSize
        settings.handshake_timeout = handshakeTimeout
        settings.max_window = initialMaxData * max(1, windowGrowth)
        settings.max_stream_window = initialMaxStreamData * max(1, windowGrowth)
        if let initialRTT, initialRTT > 0 { settings.initial_rtt = min(initialRTT, 10 * nanosecondsPerSecond) }
        if debugLog { ptt_settings_enable_log(&settings) }
        ptt_settings_set_versions(
            &settings, isServer ? 1 : 0, clientVersion ?? quicVersion, negotiatesVersion ? 1 : 0)
        return settings
    }

    /// The configured initial RTTs `validate` accepts: a first PTO (three times the initial RTT) from 3 ms to
    /// 30 s. An RTT saved for resumption is not held to the lower bound (loopback RTTs are microseconds).
    package static let initialRTTRange = nanosecondsPerMillisecond...(10 * nanosecondsPerSecond)

    func transportParameters() -> ngtcp2_transport_params {
        var params = ngtcp2_transport_params()
        ptt_transport_params_default(&params)
        params.initial_max_stream_data_bidi_local = initialMaxStreamData
        params.initial_max_stream_data_bidi_remote = initialMaxStreamData
        params.initial_max_stream_data_uni = acceptsRelayNotices ? UInt64(RelayNotice.maximumLength) : 0
        params.initial_max_data = initialMaxData
        params.initial_max_streams_bidi = maxBidirectionalStreams
        params.initial_max_streams_uni = acceptsRelayNotices ? 1 : 0
        params.max_idle_timeout = idleTimeout
        params.max_datagram_frame_size = maxDatagramFrameSize
        params.active_connection_id_limit = 4
        return params
    }
}

package let nanosecondsPerSecond: UInt64 = 1_000_000_000
package let nanosecondsPerMillisecond: UInt64 = 1_000_000

/// What a client saved from an earlier connection to the same server, in the core's terms.
package struct ClientResumption: Sendable, Hashable {
    /// GnuTLS session data (`gnutls_session_get_data2`), carrying the ticket.
    package var ticket: [UInt8]
    /// The server's transport parameters as ngtcp2 encodes them (needed for 0-RTT).
    package var transportParameters: [UInt8]
    /// The latest NEW_TOKEN (skips address validation), or empty.
    package var token: [UInt8]
    /// The last smoothed RTT in nanoseconds (0: unknown): the first RTT estimate of the new connection.
    package var smoothedRTT: UInt64
    /// The QUIC version of the connection that issued the ticket and token (`PTT_QUIC_V1` or `PTT_QUIC_V2`): both
    /// are bound to it (RFC 9369 §5), so a new connection starts in it to use them.
    package var quicVersion: UInt32

    package init(
        ticket: [UInt8], transportParameters: [UInt8], token: [UInt8], smoothedRTT: UInt64,
        quicVersion: UInt32 = UInt32(PTT_QUIC_V1)
    ) {
        self.ticket = ticket
        self.transportParameters = transportParameters
        self.token = token
        self.smoothedRTT = smoothedRTT
        self.quicVersion = quicVersion
    }
}
