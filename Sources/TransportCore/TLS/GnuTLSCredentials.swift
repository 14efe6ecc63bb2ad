internal import CNgtcp2

/// A GnuTLS certificate-credentials object and a priority cache, made together and freed together: what every TLS
/// context (client or server) holds. `fill` loads the credentials (trusted CAs, or a certificate and its key)
/// before the priority string is parsed; when either fails, what was allocated is freed before the error is thrown.
final class GnuTLSCredentials {
    let credentials: gnutls_certificate_credentials_t
    let priority: gnutls_priority_t

    init(
        priority priorityString: String, fill: (gnutls_certificate_credentials_t) throws(TransportError) -> Void
    ) throws(TransportError) {
        var credentials: gnutls_certificate_credentials_t?
        try gnutlsCheck(gnutls_certificate_allocate_credentials(&credentials), "allocating TLS credentials")
        guard let credentials else { throw TransportError(.internalError, "GnuTLS returned no credentials") }
        var priority: gnutls_priority_t?
        do throws(TransportError) {
            try fill(credentials)
            try gnutlsCheck(gnutls_priority_init(&priority, priorityString, nil), "setting the TLS priority")
        } catch {
            gnutls_certificate_free_credentials(credentials)
            throw error
        }
        self.credentials = credentials
        self.priority = priority!
    }

    deinit {
        gnutls_priority_deinit(priority)
        gnutls_certificate_free_credentials(credentials)
    }
}
