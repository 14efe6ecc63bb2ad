internal import CNgtcp2
import Glibc

/// Long-lived server TLS state: certificate chain and key, priority, the session-ticket key and the 0-RTT
/// anti-replay store. Shared by every QUIC and QMux connection of one server; frees its GnuTLS objects in `deinit`.
package final class TLSServerContext {
    let credentials: gnutls_certificate_credentials_t
    let priority: gnutls_priority_t
    /// The 64-byte key GnuTLS encrypts session tickets with (`gnutls_session_ticket_key_generate` format).
    let ticketKey: UnsafeMutablePointer<gnutls_datum_t>
    /// 0-RTT acceptance; nil: early data is refused (every resumption runs in 1-RTT).
    let antiReplay: GnuTLSAntiReplay?
    /// The anti-replay store's counters (for statistics and tests).
    package var antiReplayStore: AntiReplayStore? { antiReplay?.store }

    /// - Parameter earlyDataWindow: how long (ms) a ticket stays usable for 0-RTT, or nil to refuse 0-RTT.
    package init(certificateChainFile: String, privateKeyFile: String, ticketKey: [UInt8]?,
                 earlyDataWindow: UInt32? = nil, antiReplayCapacity: Int = 100_000) throws(TransportError) {
        for path in [certificateChainFile, privateKeyFile] where access(path, R_OK) != 0 {
            throw TransportError(.invalidConfiguration, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        var credentials: gnutls_certificate_credentials_t?
        try gnutlsCheck(gnutls_certificate_allocate_credentials(&credentials), "allocating TLS credentials")
        guard let credentials else { throw TransportError(.internalError, "GnuTLS returned no credentials") }
        self.credentials = credentials
        let key = UnsafeMutablePointer<gnutls_datum_t>.allocate(capacity: 1)
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        bytes.initialize(repeating: 0, count: 64)
        key.initialize(to: gnutls_datum_t(data: bytes, size: 64))
        self.ticketKey = key
        var priority: gnutls_priority_t?
        do throws(TransportError) {
            try gnutlsCheck(
                gnutls_certificate_set_x509_key_file(
                    credentials, certificateChainFile, privateKeyFile, GNUTLS_X509_FMT_PEM),
                "loading the certificate \(certificateChainFile) with key \(privateKeyFile)",
                code: .invalidConfiguration)
            try gnutlsCheck(gnutls_priority_init(&priority, TLSPolicy.priority, nil), "setting the TLS priority")
            if let ticketKey {
                guard ticketKey.count == 64 else {
                    throw TransportError(.invalidConfiguration, "a session-ticket key must be 64 bytes, not \(ticketKey.count)")
                }
                bytes.initialize(from: ticketKey, count: 64)
            } else {
                try gnutlsCheck(gnutls_rnd(GNUTLS_RND_KEY, bytes, 64), "generating a session-ticket key")
            }
        } catch {
            if let priority { gnutls_priority_deinit(priority) }
            gnutls_certificate_free_credentials(credentials)
            bytes.deallocate()
            key.deallocate()
            throw error
        }
        self.priority = priority!
        if let earlyDataWindow {
            antiReplay = try GnuTLSAntiReplay(windowMilliseconds: earlyDataWindow,
                                              store: AntiReplayStore(capacity: antiReplayCapacity))
        } else {
            antiReplay = nil
        }
    }

    deinit {
        memset(ticketKey.pointee.data, 0, 64)
        ticketKey.pointee.data.deallocate()
        ticketKey.deallocate()
        gnutls_priority_deinit(priority)
        gnutls_certificate_free_credentials(credentials)
    }
}

extension TLSServerContext {
    /// Applies what every server session shares, over QUIC or QMux: priority, certificate, session tickets.
    func configure(_ session: gnutls_session_t) throws(TransportError) {
        try gnutlsCheck(gnutls_priority_set(session, priority), "setting the TLS priority")
        try gnutlsCheck(gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials)),
                        "attaching TLS credentials")
        try gnutlsCheck(gnutls_session_ticket_enable_server(session, ticketKey), "enabling session tickets")
    }
}
