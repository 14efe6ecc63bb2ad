/// A failure of the transport: what happened, in words a person can act on, with the library code attached.
///
/// Modelled as a struct over a string code (not an enum) so new codes can be added without breaking callers.
/// Compare with the named codes: `catch let error as TransportError where error.code == .certificateExpired`.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. New kinds may be added in later versions.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable, machine-readable name (`certificate-untrusted`, `datagram-too-large`, ...).
        public let name: String
        package init(_ name: String) { self.name = name }
        /// The stable name, e.g. `certificate-untrusted`.
        public var description: String { name }

        /// The server's certificate does not chain to a trusted CA.
        public static let certificateUntrusted = Code("certificate-untrusted")
        /// The certificate is valid but issued for another name or address.
        public static let certificateNameMismatch = Code("certificate-name-mismatch")
        /// The certificate has expired (or is not yet valid).
        public static let certificateExpired = Code("certificate-expired")
        /// The certificate failed verification for another reason (revoked, insecure algorithm, ...).
        public static let certificateInvalid = Code("certificate-invalid")
        /// The peers share no application protocol (ALPN), or the peer sent none.
        public static let alpnMismatch = Code("alpn-mismatch")
        /// The TLS handshake failed for a reason other than the certificate or ALPN.
        public static let tlsFailure = Code("tls-failure")
        /// No handshake completed within the configured time.
        public static let handshakeTimeout = Code("handshake-timeout")
        /// The connection was idle longer than the idle timeout.
        public static let idleTimeout = Code("idle-timeout")
        /// The peer closed the connection (see `applicationErrorCode` / `transportErrorCode`).
        public static let closedByPeer = Code("closed-by-peer")
        /// The server no longer knows this connection (it restarted) and sent a stateless reset; reconnect.
        public static let connectionReset = Code("connection-reset")
        /// The connection was closed locally; the operation can no longer run.
        public static let connectionClosed = Code("connection-closed")
        /// The peer violated the protocol, or sent something malformed.
        public static let protocolViolation = Code("protocol-violation")
        /// A datagram was empty; audio frames must carry at least one byte.
        public static let datagramEmpty = Code("datagram-empty")
        /// A datagram is larger than the path and the peer allow.
        public static let datagramTooLarge = Code("datagram-too-large")
        /// The peer did not negotiate DATAGRAM support.
        public static let datagramsUnsupported = Code("datagrams-unsupported")
        /// A control message is larger than the configured maximum.
        public static let messageTooLarge = Code("message-too-large")
        /// A control message was empty; a message must carry at least one byte.
        public static let messageEmpty = Code("message-empty")
        /// A stream ended in the middle of a framed message.
        public static let messageTruncated = Code("message-truncated")
        /// The peer reset the stream (RESET_STREAM); `applicationErrorCode` holds its code.
        public static let streamReset = Code("stream-reset")
        /// The peer asked us to stop sending (STOP_SENDING); `applicationErrorCode` holds its code.
        public static let streamStopped = Code("stream-stopped")
        /// This side already finished or reset the stream.
        public static let streamClosed = Code("stream-closed")
        /// A configuration value is invalid (file missing, bad address, out-of-range limit).
        public static let invalidConfiguration = Code("invalid-configuration")
        /// A system call failed (`libraryCode` holds errno).
        public static let systemCallFailed = Code("system-call-failed")
        /// Saved resumption state could not be used (corrupt, foreign, expired); the connection went cold.
        public static let resumptionStateUnusable = Code("resumption-state-unusable")
        /// The operation was cancelled.
        public static let cancelled = Code("cancelled")
        /// The transport itself failed (a library error it could not recover from).
        public static let internalError = Code("internal-error")
        /// A server refused the connection (limit reached or server shutting down).
        public static let connectionRefused = Code("connection-refused")
        /// No network path to the server (e.g. ICMP unreachable).
        public static let unreachable = Code("unreachable")
        /// This connection cannot move to another local address (a TCP path, a server-side connection, or the
        /// server disabled migration): reconnect from the new network instead.
        public static let migrationUnsupported = Code("migration-unsupported")
        /// The connection cannot migrate yet (handshake not confirmed, no spare connection ID from the server, or
        /// another migration still validating): retry shortly.
        public static let migrationNotReady = Code("migration-not-ready")
        /// The server did not answer on the new path in time; the connection stayed on the path it had.
        public static let migrationFailed = Code("migration-failed")
        /// A key update cannot start now (the handshake is not confirmed, or the previous update is not confirmed
        /// by the peer yet, or came less than three probe timeouts ago): retry shortly.
        public static let keyUpdateNotReady = Code("key-update-not-ready")
        /// This connection has no QUIC key phases to update (a TCP path: TLS over TCP renews its own keys).
        public static let keyUpdateUnsupported = Code("key-update-unsupported")
        /// The connection is not a member of the relay channel it asked for the floor of (it never joined, left, or
        /// closed).
        public static let notAMember = Code("not-a-member")
        /// A message on a request stream (`RequestChannel`) does not start with a request ID: the peer does not
        /// speak the request envelope (see the WireFormats article), or sent garbage.
        public static let requestMalformed = Code("request-malformed")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened and what to do about it.
    public let message: String
    /// The underlying library error (`NGTCP2_ERR_*`, `GNUTLS_E_*` or errno), when there is one.
    public let libraryCode: Int?
    /// The application error code (CONNECTION_CLOSE, RESET_STREAM, STOP_SENDING), when there is one.
    public let applicationErrorCode: UInt64?
    /// The QUIC transport error code the peer or we sent, when there is one.
    public let transportErrorCode: UInt64?

    package init(
        _ code: Code, _ message: String, libraryCode: Int? = nil, applicationErrorCode: UInt64? = nil,
        transportErrorCode: UInt64? = nil
    ) {
        self.code = code
        self.message = message
        self.libraryCode = libraryCode
        self.applicationErrorCode = applicationErrorCode
        self.transportErrorCode = transportErrorCode
    }

    /// `<code>: <message>`, with the library's error code appended when there is one.
    public var description: String {
        var text = "\(code): \(message)"
        if let libraryCode, libraryCode != 0 { text += " [library code \(libraryCode)]" }
        return text
    }
}
