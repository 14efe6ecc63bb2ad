/// What a client and a relay set alike for each connection: the protocol, timeouts, message and datagram limits,
/// the first RTT estimate, and the debugging outputs. ``ClientConfiguration`` and ``ServerConfiguration`` each hold
/// one (`connection`) and read and write its settings as their own (`configuration.idleTimeout`), so each setting
/// is defined and documented once.
public struct ConnectionSettings: Sendable, Hashable {
    /// The application protocol (ALPN) for QUIC; QMux over TCP derives its own from it (`<alpn>-qx01`). A relay
    /// refuses clients offering anything else. Default `ptt/1`.
    public var alpn: String = "ptt/1"
    /// A connection that receives nothing for this long is closed (default 30 s; advertised as the QUIC and QMux
    /// idle timeout, and the effective timeout is the smaller of the client's and the relay's). With the client's
    /// default keep-alive this is how a dead path is noticed: the relay answers every keep-alive, so 30 s of
    /// silence means about two keep-alive intervals went unanswered. Keep it above the client's
    /// `keepAliveInterval`, or keep-alives never get the chance to hold it open.
    public var idleTimeout: Duration = .seconds(30)
    /// A handshake that takes longer fails: the client's `connect` with `handshakeTimeout`; on the relay, a
    /// connection whose handshake has not completed within this time of its first packet (QUIC) or of its accept
    /// (TCP: TLS and the QMux transport parameters) is closed, freeing its state and, over TCP, its descriptor, so
    /// a client that connects and stays silent is dropped. Default 10 s, enough for a handshake over a slow mobile
    /// path with retransmissions.
    public var handshakeTimeout: Duration = .seconds(10)
    /// The largest control message accepted or sent, in bytes (default 64 KiB).
    public var maximumMessageSize: Int = 64 * 1024
    /// Received datagrams buffered per connection for the application before the oldest are dropped (default 256).
    public var datagramReceiveBuffer: Int = 256
    /// Outbound datagrams per connection waiting for room in a packet before the oldest are dropped (default 256).
    public var datagramSendBuffer: Int = 256
    /// Print ngtcp2's debug log (and the transport's internal events) to stderr.
    public var debugLogging: Bool = false
    /// The first RTT estimate of a cold QUIC connection: until the first acknowledgement measures the path, loss
    /// recovery retransmits a lost Initial (client) or server flight (relay) after three times this (the probe
    /// timeout, RFC 9002 §6.2). Default 100 ms, as browsers use: a lost ClientHello on a lossy mobile link is then
    /// re-sent after 300 ms instead of the 1 s that ngtcp2's default of 333 ms (the RFC's conservative value for an
    /// unknown path) waits. On a path slower than 100 ms a first flight may be re-sent once needlessly, which costs
    /// a packet, not time. A resumed client connection ignores this and starts from the RTT measured last time.
    /// Must be between 1 ms and 10 s: other values make `connect` or `bind` throw
    /// `TransportError.Code.invalidConfiguration`.
    public var initialRTT: Duration = .milliseconds(100)
    /// Append the TLS secrets of every connection (QUIC and TCP) to this file in the NSS key log format, so
    /// Wireshark or `tshark -o tls.keylog_file:PATH` can decrypt captured traffic. nil (the default): nothing is
    /// logged.
    ///
    /// - Important: A key log is a secret: anyone holding it and a capture reads every session it covers. Enable
    ///   it only to debug, on a machine you control, never on a production relay. The file is created with mode
    ///   0600 and appended to. Without this setting GnuTLS still honours the `SSLKEYLOGFILE` environment variable
    ///   by itself; with it, the secrets go to this file only.
    public var keyLogFile: String? = nil
    /// Write a qlog of every QUIC connection into this existing directory, one file per connection named by its
    /// original destination connection ID (`<hex>_client.sqlog` or `<hex>_server.sqlog`, JSON-SEQ, readable by
    /// qvis). nil (the default): no qlog. The TCP path (QMux over TLS) writes no qlog.
    ///
    /// - Important: qlog records every packet's header and frame types (not payloads) and costs CPU and disk per
    ///   packet: enable it to debug. `connect` and `bind` throw `invalidConfiguration` when the directory is
    ///   missing or not writable, or when the running ngtcp2 is not shown to carry the fix for CVE-2026-40170 (a
    ///   peer can overflow the stack of a connection that writes qlog); see ``LinkedLibraries/qlogRefusal``.
    public var qlogDirectory: String? = nil

    /// The defaults documented on each setting.
    public init() {}
}
