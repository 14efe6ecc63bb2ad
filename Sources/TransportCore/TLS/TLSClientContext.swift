internal import CNgtcp2

/// Long-lived client TLS state: the trusted CAs and the priority string, shared by every connection an endpoint
/// makes over QUIC or QMux. Its GnuTLS credentials (`GnuTLSCredentials`) go with it.
package final class TLSClientContext {
    private let gnutls: GnuTLSCredentials
    var credentials: gnutls_certificate_credentials_t { gnutls.credentials }
    var priority: gnutls_priority_t { gnutls.priority }
    /// The `gnutls_init` flag every client session adds: a key share for the first group of the priority (X25519)
    /// only, not GnuTLS' default of two (X25519 and P-256), so a ClientHello costs one key generation. A server
    /// without X25519 asks for another offered group in a HelloRetryRequest.
    static let keyShareFlags = GNUTLS_KEY_SHARE_TOP.rawValue
    /// Where every session's secrets go (nil: nowhere, unless GnuTLS honours `SSLKEYLOGFILE`).
    let keyLog: KeyLogWriter?

    /// - Parameters:
    ///   - trust: the CAs server certificates must chain to.
    ///   - keyLog: where every session's TLS secrets go, one NSS key log line at a time; nil: nowhere.
    ///   - priority: the GnuTLS priority string; `TLSPolicy.priority` unless a test restricts it.
    ///   - identity: a certificate chain and its private key the client presents when a server asks for one
    ///     (mutual TLS, e.g. a Redis with `tls-auth-clients yes`); nil: none.
    /// - Throws: `invalidConfiguration` when the trust holds no CA certificate that loads, or the identity's
    ///   chain and key do not load or do not match.
    package init(
        trust: TrustAnchors, keyLog: KeyLogWriter? = nil, priority priorityString: String = TLSPolicy.priority,
        identity: (chain: PEMData, key: PEMData)? = nil
    ) throws(TransportError) {
        self.keyLog = keyLog
        gnutls = try GnuTLSCredentials(priority: priorityString) { credentials throws(TransportError) in
            if let identity {
                try gnutlsCheck(
                    identity.chain.withDatum { chain in
                        identity.key.withDatum { key in
                            gnutls_certificate_set_x509_key_mem(credentials, chain, key, GNUTLS_X509_FMT_PEM)
                        }
                    },
                    "loading the client certificate \(identity.chain.origin) with key \(identity.key.origin)",
                    code: .invalidConfiguration)
            }
            switch trust {
            case .system:
                let count = gnutls_certificate_set_x509_system_trust(credentials)
                if count <= 0 {
                    throw TransportError(
                        .invalidConfiguration,
                        "the system trust store has no CA certificates; install ca-certificates or pass a CA file",
                        libraryCode: Int(count))
                }
            case .certificates(let pem):
                let count = pem.withDatum {
                    gnutls_certificate_set_x509_trust_mem(credentials, $0, GNUTLS_X509_FMT_PEM)
                }
                if count <= 0 {
                    throw TransportError(
                        .invalidConfiguration,
                        "no CA certificate could be loaded from \(pem.origin): "
                            + (count < 0 ? gnutlsDescription(count) : "the file holds no PEM certificate"),
                        libraryCode: Int(count))
                }
            }
        }
    }
}

extension TLSClientContext {
    /// Applies what every client session shares, over QUIC or QMux: priority and trusted CAs.
    func configure(_ session: gnutls_session_t) throws(TransportError) {
        try gnutlsCheck(gnutls_priority_set(session, priority), "setting the TLS priority")
        try gnutlsCheck(
            gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials)),
            "attaching TLS credentials")
        if keyLog != nil {
            // The hook finds this context through the db pointer (which GnuTLS does not use on a client).
            // Unretained: every session's owner (QUIC connection, TLS stream session) keeps this context alive.
            gnutls_db_set_ptr(session, Unmanaged.passUnretained(self).toOpaque())
            KeyLogHook.install(session)
        }
    }
}

extension TLSClientContext: KeyLogSource {}
