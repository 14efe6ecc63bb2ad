internal import CNgtcp2
internal import CTransportShims
import Glibc

/// Creates the per-connection GnuTLS session for QUIC: TLS 1.3 only, ALPN enforced, certificates verified.
/// The session belongs to the `QUICConnection` that created it, which frees it in `deinit`.
enum QUICTLSSession {
    /// `hostname` must be a C string that outlives the session: GnuTLS keeps the pointer for verification.
    static func client(
        context: TLSClientContext, serverName: String, hostname: UnsafePointer<CChar>, alpn: String,
        connRef: UnsafeMutableRawPointer
    ) throws(TransportError) -> gnutls_session_t {
        var session: gnutls_session_t?
        try gnutlsCheck(
            gnutls_init(&session, ptt_gnutls_client_flags() | TLSClientContext.keyShareFlags), "creating a TLS session")
        guard let session else { throw TransportError(.internalError, "GnuTLS returned no session") }
        do throws(TransportError) {
            try context.configure(session)
            guard ngtcp2_crypto_gnutls_configure_client_session(session) == 0 else {
                throw TransportError(.internalError, "ngtcp2 could not configure the TLS session for QUIC")
            }
            gnutls_session_set_ptr(session, connRef)
            try setALPN(session, alpn, mandatory: false)
            try configureVerification(session, serverName: serverName, hostname: hostname)
            captureSessionTickets(session)
            return session
        } catch {
            gnutls_deinit(session)
            throw error
        }
    }

    /// `tickets`: the keys that seal and open this session's tickets (the connection keeps them alive).
    static func server(
        context: TLSServerContext, tickets: ServerTicketKeys, alpn: [String], connRef: UnsafeMutableRawPointer
    ) throws(TransportError) -> gnutls_session_t {
        var session: gnutls_session_t?
        try gnutlsCheck(gnutls_init(&session, ptt_gnutls_server_flags()), "creating a TLS session")
        guard let session else { throw TransportError(.internalError, "GnuTLS returned no session") }
        do throws(TransportError) {
            try context.configure(session, tickets: tickets)
            guard ngtcp2_crypto_gnutls_configure_server_session(session) == 0 else {
                throw TransportError(.internalError, "ngtcp2 could not configure the TLS session for QUIC")
            }
            gnutls_session_set_ptr(session, connRef)
            try setALPN(session, alpn, mandatory: true)  // the context's ClientHello hook refuses no ALPN
            if let antiReplay = context.antiReplay {
                gnutls_anti_replay_enable(session, antiReplay.context)
                // QUIC requires max_early_data_size 0xffffffff in the ticket (RFC 9001 §4.6.1).
                try gnutlsCheck(gnutls_record_set_max_early_data_size(session, 0xffff_ffff), "enabling 0-RTT")
            }
            return session
        } catch {
            gnutls_deinit(session)
            throw error
        }
    }

    /// Offers (client) or accepts (server) exactly one ALPN identifier.
    static func setALPN(_ session: gnutls_session_t, _ alpn: String, mandatory: Bool) throws(TransportError) {
        try setALPN(session, [alpn], mandatory: mandatory)
    }

    /// Accepts (server) any of `alpns`, the first preferred; a client offering one of them gets it.
    static func setALPN(_ session: gnutls_session_t, _ alpns: [String], mandatory: Bool) throws(TransportError) {
        var bytes = alpns.flatMap { Array($0.utf8) }
        let rv = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var offset = 0
            var datums = alpns.map { alpn -> gnutls_datum_t in
                defer { offset += alpn.utf8.count }
                return gnutls_datum_t(data: buffer.baseAddress! + offset, size: UInt32(alpn.utf8.count))
            }
            return gnutls_alpn_set_protocols(
                session, &datums, UInt32(datums.count), mandatory ? GNUTLS_ALPN_MANDATORY.rawValue : 0)
        }
        try gnutlsCheck(rv, "setting ALPN \(alpns.joined(separator: ", "))")
    }

    /// Client: every NewSessionTicket refreshes the resumption data (`gnutls_session_get_data2`), reported to the
    /// owning connection as a `.sessionTicket` event.
    static func captureSessionTickets(_ session: gnutls_session_t) {
        gnutls_handshake_set_hook_function(
            session, UInt32(GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue), Int32(GNUTLS_HOOK_POST)
        ) { session, _, _, _, _ in
            var data = gnutls_datum_t()
            guard gnutls_session_get_data2(session, &data) == 0, let bytes = data.data else { return 0 }
            let ticket = Array(UnsafeBufferPointer(start: bytes, count: Int(data.size)))
            ptt_gnutls_free(bytes)
            let ref = gnutls_session_get_ptr(session)!.assumingMemoryBound(to: ngtcp2_crypto_conn_ref.self)
            // Unretained: the connection owns this session, so it is alive while GnuTLS runs its hooks.
            Unmanaged<QUICConnection>.fromOpaque(ref.pointee.user_data).takeUnretainedValue()
                .record(.sessionTicket(ticket))
            return 0
        }
    }

    /// Loads saved session data so the ClientHello offers resumption (and 0-RTT when the ticket allows it).
    static func setResumptionData(_ session: gnutls_session_t, _ ticket: [UInt8]) -> Bool {
        ticket.withUnsafeBytes { gnutls_session_set_data(session, $0.baseAddress, $0.count) } == 0
    }

    /// Whether the server accepted our early data (valid once the handshake completed).
    static func earlyDataAccepted(_ session: gnutls_session_t) -> Bool {
        gnutls_session_get_flags(session) & GNUTLS_SFLAGS_EARLY_DATA.rawValue != 0
    }

    /// Whether this session resumed from a ticket.
    static func isResumed(_ session: gnutls_session_t) -> Bool {
        gnutls_session_is_resumed(session) != 0
    }

    /// Server: sends a NewSessionTicket after the handshake (tickets are not sent automatically in QUIC mode).
    static func sendSessionTicket(_ session: gnutls_session_t) -> Bool {
        gnutls_session_ticket_send(session, 1, 0) == 0
    }

    /// Server: seals the session's next tickets with `tickets` (and points the handshake hook at them). False when
    /// GnuTLS refuses: it lets a session switch keys only until it used one (e.g. to open a presented ticket).
    static func switchTicketKeys(_ session: gnutls_session_t, to tickets: ServerTicketKeys) -> Bool {
        guard gnutls_session_ticket_enable_server(session, tickets.current) == 0 else { return false }
        // Unretained: the connection that owns the session keeps `tickets` alive (see TLSServerContext).
        gnutls_db_set_ptr(session, Unmanaged.passUnretained(tickets).toOpaque())
        return true
    }

    /// Verifies the certificate chain and the name (DNS name, or IP address for a numeric host).
    /// SNI carries DNS names only (RFC 6066 §3 forbids IP literals).
    static func configureVerification(
        _ session: gnutls_session_t, serverName: String,
        hostname: UnsafePointer<CChar>
    ) throws(TransportError) {
        guard !serverName.isEmpty else {
            throw TransportError(.invalidConfiguration, "a server name is required to verify the certificate")
        }
        if !isIPLiteral(serverName) {
            try gnutlsCheck(
                gnutls_server_name_set(session, GNUTLS_NAME_DNS, serverName, serverName.utf8.count),
                "setting the server name")
        }
        gnutls_session_set_verify_cert(session, hostname, 0)
    }

    static func isIPLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The negotiated ALPN identifier, if any.
    static func selectedALPN(_ session: gnutls_session_t) -> String? {
        var selected = gnutls_datum_t()
        guard gnutls_alpn_get_selected_protocol(session, &selected) == 0, let data = selected.data else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(selected.size)), as: UTF8.self)
    }

    /// Turns a failed handshake into the precise error: which certificate check failed, or the ALPN refusal.
    static func handshakeFailure(_ session: gnutls_session_t, tlsError: Int32, serverName: String?) -> TransportError {
        if tlsError == GNUTLS_E_FATAL_ALERT_RECEIVED {
            let alert = gnutls_alert_get(session)
            let name = gnutls_alert_get_name(alert).map { String(cString: $0) } ?? "alert \(alert.rawValue)"
            switch alert {
            case GNUTLS_A_NO_APPLICATION_PROTOCOL:
                return TransportError(
                    .alpnMismatch, "the peer refused the application protocol (ALPN): \(name)",
                    libraryCode: Int(tlsError))
            case GNUTLS_A_PROTOCOL_VERSION:
                return TransportError(
                    .tlsFailure, "the peer does not speak TLS 1.3 (it sent \(name))",
                    libraryCode: Int(tlsError))
            default:
                return TransportError(
                    .tlsFailure, "the peer ended the TLS handshake: \(name)",
                    libraryCode: Int(tlsError))
            }
        }
        // ngtcp2's GnuTLS glue does not always record the GnuTLS error: the verification status is the truth.
        // Servers verify nobody; all bits set (-1) is GnuTLS' "not verified yet": the handshake failed before a
        // certificate arrived (a peer that does not speak TLS), which is no certificate failure.
        var status = serverName == nil ? 0 : gnutls_session_get_verify_cert_status(session)
        if status == UInt32.max { status = 0 }
        if status != 0 || tlsError == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR || tlsError == GNUTLS_E_CERTIFICATE_ERROR
        {
            return certificateFailure(status: status, serverName: serverName, libraryCode: tlsError)
        }
        if tlsError == GNUTLS_E_NO_APPLICATION_PROTOCOL {
            return TransportError(
                .alpnMismatch, "the peers share no application protocol (ALPN)",
                libraryCode: Int(tlsError))
        }
        if tlsError == GNUTLS_E_UNSUPPORTED_VERSION_PACKET || tlsError == GNUTLS_E_NO_PRIORITIES_WERE_SET {
            return TransportError(
                .tlsFailure, "the peer does not speak TLS 1.3: \(gnutlsDescription(tlsError))",
                libraryCode: Int(tlsError))
        }
        return TransportError(
            .tlsFailure, "the TLS handshake failed: \(gnutlsDescription(tlsError))",
            libraryCode: Int(tlsError))
    }

    /// Maps GnuTLS' verification status bits to one clear error.
    static func certificateFailure(status: UInt32, serverName: String?, libraryCode: Int32) -> TransportError {
        let name = serverName ?? "the server"
        func has(_ flag: gnutls_certificate_status_t) -> Bool { status & flag.rawValue != 0 }
        if has(GNUTLS_CERT_EXPIRED) || has(GNUTLS_CERT_NOT_ACTIVATED) {
            return TransportError(
                .certificateExpired,
                "the certificate of \(name) is expired or not yet valid; renew it on the server or check the clock",
                libraryCode: Int(libraryCode))
        }
        if has(GNUTLS_CERT_SIGNER_NOT_FOUND) || has(GNUTLS_CERT_SIGNER_NOT_CA) {
            return TransportError(
                .certificateUntrusted,
                "the certificate of \(name) is not signed by a trusted CA; configure the CA that issued it",
                libraryCode: Int(libraryCode))
        }
        if has(GNUTLS_CERT_UNEXPECTED_OWNER) {
            return TransportError(
                .certificateNameMismatch,
                "the certificate is not valid for \(name); connect with the name the certificate was issued for",
                libraryCode: Int(libraryCode))
        }
        return TransportError(
            .certificateInvalid,
            "the certificate of \(name) failed verification (status 0x\(String(status, radix: 16)))",
            libraryCode: Int(libraryCode))
    }
}
