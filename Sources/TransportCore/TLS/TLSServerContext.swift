internal import CNgtcp2

/// Long-lived server TLS state: certificate chain and key, priority, the session-ticket key and the 0-RTT
/// anti-replay store. Shared by every QUIC and QMux connection of one server; its GnuTLS objects go with it.
package final class TLSServerContext {
    private let gnutls: GnuTLSCredentials
    var credentials: gnutls_certificate_credentials_t { gnutls.credentials }
    var priority: gnutls_priority_t { gnutls.priority }
    /// The 64-byte key GnuTLS encrypts session tickets with (`gnutls_session_ticket_key_generate` format) and a
    /// retired one whose tickets still resume during a rotation (see `TicketKeySelection`). QUIC sessions use
    /// them as they are; QMux sessions use keys bound to their ALPN (`ServerTicketKeys.bound(toALPN:)`).
    let tickets: ServerTicketKeys
    /// 0-RTT acceptance; nil: early data is refused (every resumption runs in 1-RTT).
    let antiReplay: GnuTLSAntiReplay?
    /// The anti-replay store's counters (for statistics and tests).
    package var antiReplayStore: AntiReplayStore? { antiReplay?.store as? AntiReplayStore }
    /// What decides 0-RTT (nil: early data is refused): where a held first flight's claim is made.
    package var zeroRTTAdmission: (any ZeroRTTAdmission)? { antiReplay?.store }

    /// Feeds a held first flight again (`body`) with the store's answer for its ticket (see `GnuTLSAntiReplay`).
    package func deciding<T, E: Error>(
        _ claim: ZeroRTTClaim, accepted: Bool, _ body: () throws(E) -> T
    ) throws(E) -> T {
        guard let antiReplay else { return try body() }
        return try antiReplay.deciding(claim.ticket, accepted: accepted, body)
    }
    /// Where every session's secrets go (nil: nowhere, unless GnuTLS honours `SSLKEYLOGFILE`).
    let keyLog: KeyLogWriter?

    /// - Parameters:
    ///   - certificateChain: the PEM certificate chain, the server's own certificate first.
    ///   - privateKey: the PEM private key of the chain's first certificate.
    ///   - earlyDataWindow: how long (ms) after issue a ticket stays usable for 0-RTT, or nil to refuse 0-RTT.
    ///   - antiReplayCapacity: the 0-RTT ticket budget: tickets issued with 0-RTT per window (the store's size).
    ///   - previousTicketKey: the ticket key being retired; tickets it sealed keep resuming (rotation overlap).
    ///   - keyLog: where every session's TLS secrets go, one NSS key log line at a time; nil: nowhere.
    ///   - antiReplayStore: a store shared with the contexts of the server's other event loops, or this loop's
    ///     client of a fleet's shared store (nil: a new one of `antiReplayCapacity` entries and `earlyDataWindow`;
    ///     a given store brings its own size and window).
    ///   - priority: the GnuTLS priority string; `TLSPolicy.priority` unless a test restricts it.
    ///   - maxHeldFlights: the most first flights this context's connections hold at once while their ticket's
    ///     claim is asked of a shared store (beyond: 0-RTT refused at once, see `GnuTLSAntiReplay`).
    /// - Throws: `invalidConfiguration` when the chain and key do not load (or do not match), or a ticket key is
    ///   not 64 bytes.
    package init(
        certificateChain: PEMData, privateKey: PEMData, ticketKey: [UInt8]?,
        earlyDataWindow: UInt32? = nil, antiReplayCapacity: Int = 100_000,
        previousTicketKey: [UInt8]? = nil, keyLog: KeyLogWriter? = nil,
        antiReplayStore: (any ZeroRTTAdmission)? = nil, priority priorityString: String = TLSPolicy.priority,
        maxHeldFlights: Int = 512
    ) throws(TransportError) {
        self.keyLog = keyLog
        if let previousTicketKey, previousTicketKey.count != 64 {
            throw TransportError(
                .invalidConfiguration,
                "a previous session-ticket key must be 64 bytes, not \(previousTicketKey.count)")
        }
        let antiReplay = try earlyDataWindow.map { window throws(TransportError) in
            try GnuTLSAntiReplay(
                store: antiReplayStore
                    ?? AntiReplayStore(capacity: antiReplayCapacity, windowSeconds: Int64(window / 1000)),
                maxHeldFlights: maxHeldFlights)
        }
        self.antiReplay = antiReplay
        if let ticketKey, ticketKey.count != 64 {
            throw TransportError(
                .invalidConfiguration, "a session-ticket key must be 64 bytes, not \(ticketKey.count)")
        }
        gnutls = try GnuTLSCredentials(priority: priorityString) { credentials throws(TransportError) in
            try gnutlsCheck(
                certificateChain.withDatum { chain in
                    privateKey.withDatum { key in
                        gnutls_certificate_set_x509_key_mem(credentials, chain, key, GNUTLS_X509_FMT_PEM)
                    }
                },
                "loading the certificate \(certificateChain.origin) with key \(privateKey.origin)",
                code: .invalidConfiguration)
        }
        let tickets = ServerTicketKeys(
            current: ticketKey, previous: previousTicketKey, keyLog: keyLog, antiReplay: antiReplay)
        self.tickets = tickets
        if ticketKey == nil {
            try gnutlsCheck(
                gnutls_rnd(GNUTLS_RND_KEY, tickets.current.pointee.data, 64), "generating a session-ticket key")
        }
    }
}

extension TLSServerContext {
    /// Applies what every server session shares, over QUIC or QMux: priority, certificate, session tickets
    /// (sealed with `tickets`, the context's own keys by default; they must outlive the session).
    func configure(_ session: gnutls_session_t, tickets: ServerTicketKeys? = nil) throws(TransportError) {
        let tickets = tickets ?? self.tickets
        try gnutlsCheck(gnutls_priority_set(session, priority), "setting the TLS priority")
        try gnutlsCheck(
            gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials)),
            "attaching TLS credentials")
        try gnutlsCheck(gnutls_session_ticket_enable_server(session, tickets.current), "enabling session tickets")
        installHandshakeHook(session, tickets: tickets)  // also points the session's db pointer at `tickets`
        if keyLog != nil { KeyLogHook.install(session) }
    }

    /// One hook on the handshake messages (GnuTLS keeps one hook per session). On the received ClientHello,
    /// before GnuTLS processes it: pick the ticket key its PSK identity names (rotation overlap) and note its
    /// ticket for anti-replay; after: refuse a ClientHello that negotiated no ALPN — `GNUTLS_ALPN_MANDATORY`
    /// refuses other protocols but not a ClientHello without the extension — and end the handshake when its
    /// ticket's claim in a shared store started (see `GnuTLSAntiReplay`). On each NewSessionTicket sent: record the
    /// ticket in the anti-replay store (its 0-RTT budget).
    private func installHandshakeHook(_ session: gnutls_session_t, tickets: ServerTicketKeys) {
        // Unretained: every session's owner (QUIC connection, TLS stream session) keeps its ticket keys alive.
        gnutls_db_set_ptr(session, Unmanaged.passUnretained(tickets).toOpaque())
        gnutls_handshake_set_hook_function(
            session, UInt32.max, Int32(GNUTLS_HOOK_BOTH)  // GNUTLS_HANDSHAKE_ANY, a macro Swift cannot import
        ) { session, type, when, incoming, message in
            guard let session, let pointer = gnutls_db_get_ptr(session) else { return 0 }
            let keys = Unmanaged<ServerTicketKeys>.fromOpaque(pointer).takeUnretainedValue()
            let body = UnsafeRawBufferPointer(start: message?.pointee.data, count: Int(message?.pointee.size ?? 0))
            switch (type, when == UInt32(GNUTLS_HOOK_PRE)) {
            case (UInt32(GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue), true) where incoming != 0:
                if body.baseAddress != nil { keys.clientHelloArrived(session, clientHello: body) }
                return 0
            case (UInt32(GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue), false) where incoming != 0:
                var selected = gnutls_datum_t()
                guard gnutls_alpn_get_selected_protocol(session, &selected) == 0 else {
                    keys.antiReplay?.dropClaim()
                    return GNUTLS_E_NO_APPLICATION_PROTOCOL
                }
                return keys.antiReplay?.clientHelloProcessed(session) ?? 0
            case (UInt32(GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue), false) where incoming == 0:
                if body.baseAddress != nil { keys.antiReplay?.ticketIssued(newSessionTicket: body) }
                return 0
            default:
                return 0
            }
        }
    }
}
