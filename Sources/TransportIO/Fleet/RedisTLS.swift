import TransportCore

/// How a Redis connection is protected (`rediss://`): TLS on GnuTLS, the server's certificate always verified
/// against `trust` and its name against `serverName` — there is no way to turn verification off. Made once, off
/// the event loops (reading the system store reads files); each connection then makes its own `RedisTLSChannel`.
package final class RedisTLS: @unchecked Sendable {
    // @unchecked Sendable invariant: `context` is not changed after init; GnuTLS lets sessions on any thread share
    // one set of certificate credentials and one priority cache read-only.
    let context: TLSClientContext
    /// The name the server's certificate must carry (the URL's host).
    package let serverName: String

    /// TLS 1.3, or TLS 1.2 with an ephemeral key exchange and an AEAD (managed Redis services still offer 1.2): no
    /// RSA key transport, no CBC.
    package static let priority =
        "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"

    /// - Parameter identity: the relay's certificate chain and key, presented when Redis asks for one
    ///   (`tls-auth-clients yes`); nil: none.
    /// - Throws: `invalidConfiguration` when `trust` holds no CA certificate that loads, or `identity` does not load.
    package init(
        trust: TrustAnchors, serverName: String, identity: (chain: PEMData, key: PEMData)? = nil
    ) throws(TransportError) {
        context = try TLSClientContext(trust: trust, priority: Self.priority, identity: identity)
        self.serverName = serverName
        presentsCertificate = identity != nil
    }

    /// Whether the relay presents a client certificate (`--redis-cert`) when Redis asks for one.
    let presentsCertificate: Bool
}

/// One Redis connection's TLS, sans-IO: ciphertext read from the socket goes in (`receive`) and RESP replies come
/// out; commands go in (`send`, queued until the handshake completed) and ciphertext comes out for the socket
/// (`takeCiphertext`). A failure is a `TransportError` that says what to check (the CA, the name, the port).
///
/// - Important: Use it on one thread (its owner's).
package final class RedisTLSChannel {
    private let session: TLSStreamSession
    private let serverName: String
    private let presentsCertificate: Bool
    /// Commands queued before the handshake completed.
    private var waiting: [UInt8] = []
    /// Whether any byte came from the server yet (a plain Redis answers a ClientHello with text, or nothing).
    private var heardFromServer = false

    /// A channel whose ClientHello is ready in `takeCiphertext`.
    package init(_ tls: RedisTLS) throws(TransportError) {
        serverName = tls.serverName
        presentsCertificate = tls.presentsCertificate
        session = try TLSStreamSession(client: tls.context, serverName: tls.serverName, alpn: nil, ticket: nil)
        _ = try advance()
    }

    /// Whether the handshake completed (the server's certificate and name were verified).
    package var isHandshakeComplete: Bool { session.isHandshakeComplete }

    /// Encrypts `plaintext`, or queues it until the handshake completed.
    package func send(_ plaintext: [UInt8]) throws(TransportError) {
        guard session.isHandshakeComplete else {
            waiting += plaintext
            return
        }
        try session.send(plaintext)
    }

    /// Ciphertext read from the socket: the plaintext (RESP) it carried.
    package func receive(_ ciphertext: UnsafeRawBufferPointer) throws(TransportError) -> [UInt8] {
        if !ciphertext.isEmpty { heardFromServer = true }
        session.receive(ciphertext)
        return try advance()
    }

    /// Ciphertext to write to the socket.
    package func takeCiphertext() -> [UInt8] { session.takeCiphertext() }

    /// Why the server closed the connection before the handshake completed, as something to act on.
    package func closedDuringHandshake() -> TransportError {
        TransportError(
            .tlsFailure,
            "Redis at \(serverName) closed the connection during the TLS handshake (rediss://): check that the port "
                + "is Redis' tls-port, that it accepts TLS 1.2 or 1.3, and, with tls-auth-clients yes, that the relay "
                + "presents a client certificate Redis' tls-ca-cert-file signed (--redis-cert and --redis-key)")
    }

    /// Why no handshake completed in time, as something to act on.
    package func handshakeTimedOut() -> TransportError {
        TransportError(
            .handshakeTimeout,
            "the TLS handshake with Redis at \(serverName) did not complete in time (rediss://): check that the port "
                + "is Redis' tls-port (a plain port is redis://, not rediss://)")
    }

    private func advance() throws(TransportError) -> [UInt8] {
        let events: [TLSStreamEvent]
        do {
            events = try session.advance()
        } catch {
            throw explain(error)
        }
        var plaintext: [UInt8] = []
        for event in events {
            switch event {
            case .handshakeCompleted:
                if !waiting.isEmpty {
                    try session.send(waiting)
                    waiting = []
                }
            case .plaintext(let bytes): plaintext += bytes
            case .closeNotify: throw TransportError(.connectionClosed, "Redis ended its TLS session (close_notify)")
            case .earlyPlaintext, .sessionTicket: break  // a client gets no early data; Redis sessions are not resumed
            }
        }
        return plaintext
    }

    /// The session's failure with what to do about it.
    private func explain(_ error: TransportError) -> TransportError {
        let advice: String
        switch error.code {
        case .certificateUntrusted, .certificateExpired, .certificateInvalid:
            advice =
                "pass the CA that signed Redis' tls-cert-file with --redis-ca FILE (the system store is used "
                + "without it), or renew the certificate"
        case .certificateNameMismatch:
            advice = "the URL's host must be a name (or address) Redis' certificate carries"
        default:
            advice =
                session.isHandshakeComplete || !heardFromServer
                ? "check Redis' TLS settings"
                    + (presentsCertificate
                        ? ""
                        : " (a Redis with tls-auth-clients yes ends the session with an alert unless the relay "
                            + "presents a certificate: --redis-cert and --redis-key)")
                : "this port may not speak TLS: a plain Redis port is redis://, not rediss://"
        }
        return TransportError(
            error.code, "Redis over TLS at \(serverName): \(error.message); \(advice)", libraryCode: error.libraryCode)
    }
}
