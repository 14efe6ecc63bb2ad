internal import CNgtcp2
internal import CTransportShims
import Glibc

/// What a `TLSStreamSession` reports from `advance()`, in the order it happened.
package enum TLSStreamEvent: Hashable, Sendable {
    /// The handshake finished: certificate, name and ALPN verified (server: the client's Finished arrived).
    case handshakeCompleted
    /// Decrypted application bytes.
    case plaintext([UInt8])
    /// Server: application bytes the client sent as TLS early data (0-RTT), accepted by the anti-replay check.
    /// They come before `.handshakeCompleted`; they may be a replay-safe request only.
    case earlyPlaintext([UInt8])
    /// Client: a NewSessionTicket arrived; the bytes resume the next session.
    case sessionTicket([UInt8])
    /// The peer sent close_notify: no more plaintext will come.
    case closeNotify
}

/// TLS 1.3 over a reliable byte stream (TCP), sans-IO, on GnuTLS: the owner feeds ciphertext it read with
/// `receive`, calls `advance` to run the handshake and decrypt, encrypts with `send`, and writes what
/// `takeCiphertext` returns. No sockets, no clock, no threads. Verification and ALPN follow the same policy as
/// QUIC (`TLSPolicy`, `QUICTLSSession`): certificate chain and name always checked, exactly one ALPN, TLS 1.3 only.
///
/// Latency: on a full handshake the server's handshake completes as soon as its Finished is out (GnuTLS "early
/// start"), so QMux's transport parameters ride in the server's first flight and the client can send stream data
/// with its own Finished. GnuTLS 3.7.9 does not early-start PSK (resumed) handshakes (lib/handshake-tls13.c,
/// STATE107-108): a resumed server answers after the client's Finished (and EndOfEarlyData). Resumption uses TLS
/// 1.3 tickets; a client may send early data (0-RTT) with `sendEarly` when its ticket allows it, and a server whose
/// context has an anti-replay store accepts it (at most once per ClientHello) and reports it as `.earlyPlaintext`.
///
/// Owns its `gnutls_session_t` and frees it in `deinit`; use it on one thread.
package final class TLSStreamSession {
    let session: gnutls_session_t
    /// The context whose credentials (and anti-replay store) the session uses: kept alive as long as it.
    private let context: AnyObject
    /// Server: the ticket keys bound to `alpn` (the session's db pointer points at them).
    private let ticketKeys: ServerTicketKeys?
    package let isClient: Bool
    private let serverName: String?
    private let hostname: UnsafeMutablePointer<CChar>?
    /// The one ALPN this session offers (client) or selects (server); nil: a client that offers none (Redis over
    /// TLS, whose servers negotiate no application protocol).
    let alpn: String?
    private var inbound: [UInt8] = []
    private var inboundStart = 0
    /// Ciphertext GnuTLS read before the handshake completed, and the most it may read (`handshakeInputLimit`).
    private var handshakeInput = 0
    private let handshakeInputLimit: Int
    private var outbound: [UInt8] = []
    private var events: [TLSStreamEvent] = []
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024 + 256)

    package private(set) var isHandshakeComplete = false
    private var failure: TransportError?
    /// Server with an anti-replay store: every byte received until GnuTLS read the ClientHello, kept so the flight
    /// can be fed to a fresh session when its ticket's claim must be asked of a shared store (nil once the
    /// ClientHello was read, or once it passed `QUICServerEndpoint.heldFlightBytes`: 0-RTT is then refused rather
    /// than the flight held).
    private var replayable: [UInt8]?
    /// Server: the claim this session's handshake ended for (see `GnuTLSAntiReplay`); the session takes no more
    /// part, and its owner feeds `heldInput` to a fresh one with the answer.
    package private(set) var heldClaim: ZeroRTTClaim?
    /// While held: the bytes received passed `QUICServerEndpoint.heldFlightBytes` (the owner feeds them again at
    /// once, with 0-RTT refused).
    package private(set) var heldInputOverflowed = false
    private let antiReplay: GnuTLSAntiReplay?
    /// Client: early data was queued for the first flight.
    package private(set) var earlyDataAttempted = false
    private var handshakeStarted = false

    /// A client session. `ticket` (from an earlier `.sessionTicket`) offers resumption. `alpn` nil offers no
    /// application protocol (a peer such as Redis that negotiates none); certificate and name are verified all the same.
    package init(
        client context: TLSClientContext, serverName: String, alpn: String?,
        ticket: [UInt8]?
    ) throws(TransportError) {
        var created: gnutls_session_t?
        try gnutlsCheck(
            gnutls_init(&created, ptt_gnutls_stream_client_flags() | TLSClientContext.keyShareFlags),
            "creating a TLS session")
        guard let created else { throw TransportError(.internalError, "GnuTLS returned no session") }
        session = created
        self.context = context
        ticketKeys = nil
        antiReplay = nil
        isClient = true
        handshakeInputLimit = Self.maximumServerFlight
        self.serverName = serverName
        hostname = strdup(serverName)
        self.alpn = alpn
        try context.configure(session)
        if let alpn { try QUICTLSSession.setALPN(session, alpn, mandatory: false) }
        try QUICTLSSession.configureVerification(session, serverName: serverName, hostname: hostname!)
        if let ticket, !ticket.isEmpty { _ = QUICTLSSession.setResumptionData(session, ticket) }
        attachTransport()
        installHook(UInt32(GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue))
    }

    /// A server session: it resumes clients whose ticket the context's key opens, and accepts early data when
    /// the context has an anti-replay store (its tickets then allow `maximumEarlyData` bytes of 0-RTT).
    package init(server context: TLSServerContext, alpn: String) throws(TransportError) {
        var created: gnutls_session_t?
        try gnutlsCheck(
            gnutls_init(&created, ptt_gnutls_stream_server_flags(context.antiReplay != nil ? 1 : 0)),
            "creating a TLS session")
        guard let created else { throw TransportError(.internalError, "GnuTLS returned no session") }
        session = created
        self.context = context
        // A ticket sealed under another ALPN (a QUIC ticket) does not open here: no 0-RTT across protocols.
        let ticketKeys = try context.tickets.bound(toALPN: alpn)
        self.ticketKeys = ticketKeys
        antiReplay = context.antiReplay
        replayable = context.antiReplay == nil ? nil : []
        isClient = false
        handshakeInputLimit = Self.maximumClientFlights
        serverName = nil
        hostname = nil
        self.alpn = alpn
        try context.configure(session, tickets: ticketKeys)
        try QUICTLSSession.setALPN(session, alpn, mandatory: true)
        if let antiReplay = context.antiReplay {
            gnutls_anti_replay_enable(session, antiReplay.context)
            try gnutlsCheck(gnutls_record_set_max_early_data_size(session, Self.maximumEarlyData), "enabling 0-RTT")
        }
        attachTransport()  // the context's ClientHello hook refuses a ClientHello without ALPN
    }

    deinit {
        gnutls_deinit(session)
        free(hostname)
    }

    /// The early data a server accepts per connection over TCP (advertised in its tickets).
    package static let maximumEarlyData = 16 * 1024

    /// Server: the most ciphertext it reads before its handshake completes — a ClientHello of up to 64 KiB (real
    /// ones are a few KiB; post-quantum key shares and padding stay far below), `maximumEarlyData` of 0-RTT,
    /// EndOfEarlyData, Finished, and 16 KiB of room for record headers and tags. A client that sends more is
    /// closed (`protocolViolation`): without this bound a ClientHello announced near GnuTLS' 128 KiB limit and
    /// sent in 1-byte records kept the relay reading until the handshake timeout.
    package static let maximumClientFlights = 64 * 1024 + maximumEarlyData + 16 * 1024

    /// Client: the most ciphertext it reads before its handshake completes: the server's flight, whose
    /// certificate chain GnuTLS already refuses past its 128 KiB handshake limit, with room for record overhead.
    package static let maximumServerFlight = 256 * 1024

    // MARK: - Bytes in and out

    /// Client, before the first `advance`: queues `bytes` as TLS early data (0-RTT) for the first flight. False
    /// (nothing queued) when the ticket does not allow early data or not that much; the bytes must then wait for
    /// the handshake. Whether the server accepted them is `earlyDataAccepted` once the handshake completed.
    package func sendEarly(_ bytes: [UInt8]) -> Bool {
        guard isClient, !handshakeStarted, !bytes.isEmpty, failure == nil,
            gnutls_record_get_max_early_data_size(session) >= bytes.count
        else { return false }
        let rv = bytes.withUnsafeBytes { gnutls_record_send_early_data(session, $0.baseAddress, $0.count) }
        guard rv >= 0 else { return false }
        earlyDataAttempted = true
        return true
    }

    /// Client, after the handshake: whether the server accepted the early data.
    package var earlyDataAccepted: Bool { earlyDataAttempted && QUICTLSSession.earlyDataAccepted(session) }

    /// Server: whether it accepted the client's early data.
    package var acceptedEarlyData: Bool { QUICTLSSession.earlyDataAccepted(session) }

    /// Ciphertext read from the stream. What `advance` consumed is dropped first, so the buffer holds only what
    /// GnuTLS has not read yet: at most one partial record once `advance` ran (see `bufferedCiphertext`).
    /// The buffer is made anew at exactly its size, and `advance` leaves only the partial record GnuTLS has not read:
    /// it never keeps the capacity of an earlier burst.
    package func receive(_ bytes: UnsafeRawBufferPointer) {
        if heldClaim != nil {  // GnuTLS is done with this session: the bytes wait for the next one
            replayable?.append(contentsOf: bytes)
            if (replayable?.count ?? 0) > QUICServerEndpoint.heldFlightBytes { heldInputOverflowed = true }
            return
        }
        if replayable != nil {
            if replayable!.count + bytes.count <= QUICServerEndpoint.heldFlightBytes {
                replayable!.append(contentsOf: bytes)
            } else {
                replayable = nil  // too much to hold: its 0-RTT will be refused rather than held
            }
        }
        inbound = inbound.remainder(from: inboundStart, appending: bytes)
        inboundStart = 0
    }

    /// Ciphertext received and not yet read by GnuTLS.
    package var bufferedCiphertext: Int { inbound.count - inboundStart }

    /// Ciphertext to write to the stream (and forget).
    package func takeCiphertext() -> [UInt8] {
        let bytes = outbound
        outbound = []  // the caller owns the storage now; keeping its capacity here would copy it
        return bytes
    }

    /// Whether ciphertext is waiting to be written.
    package var hasCiphertext: Bool { !outbound.isEmpty }

    /// Encrypts application bytes (after `handshakeCompleted`).
    package func send(_ bytes: [UInt8]) throws(TransportError) {
        if let failure { throw failure }
        guard isHandshakeComplete else {
            throw TransportError(.internalError, "TLS application data cannot be sent before the handshake")
        }
        var offset = 0
        while offset < bytes.count {
            let rv = bytes.withUnsafeBytes { buffer in
                gnutls_record_send(session, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if rv < 0 {
                if rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED { continue }
                throw fail(
                    TransportError(
                        .tlsFailure, "encrypting a TLS record failed: \(gnutlsDescription(Int32(rv)))",
                        libraryCode: Int(rv)))
            }
            offset += rv
        }
    }

    /// Sends close_notify: this side will send nothing more.
    package func close() {
        guard failure == nil else { return }
        _ = gnutls_bye(session, GNUTLS_SHUT_WR)
    }

    // MARK: - Progress

    /// Runs the handshake and decrypts what has arrived. Throws the precise handshake failure (certificate,
    /// ALPN, version) or a record-layer error; after a throw the session is dead and every call throws it.
    /// Server, while held: what the client sent so far, to feed a fresh session.
    package var heldInput: [UInt8]? { heldClaim == nil ? nil : replayable }

    package func advance() throws(TransportError) -> [TLSStreamEvent] {
        if let failure { throw failure }
        if heldClaim != nil { return [] }
        if !isHandshakeComplete {
            handshakeStarted = true
            try runHandshake()
        }
        if isHandshakeComplete { try readRecords() }
        if inboundStart > 0 {  // between reads, only the partial record GnuTLS has not read stays
            inbound = inbound.remainder(from: inboundStart, appending: EmptyCollection())
            inboundStart = 0
        }
        defer { events.removeAll() }
        return events
    }

    /// Calls `gnutls_handshake` until it completes or stops consuming input. GnuTLS 3.7.9 reads one record per
    /// call while a handshake message is incomplete (lib/buffers.c), so a ClientHello or early data in several
    /// records that arrived together needs as many calls; one call per read left them unanswered until the
    /// handshake timeout. Fails once the peer sent more than `handshakeInputLimit` before completing.
    private func runHandshake() throws(TransportError) {
        while true {
            let consumedBefore = inboundStart
            antiReplay?.beginFeed(holdable: replayable != nil)
            let rv = gnutls_handshake(session)
            if let claim = antiReplay?.endFeed() {
                heldClaim = claim  // nothing was sent: the owner holds the flight while the store is asked
                return
            }
            if replayable != nil && gnutls_handshake_get_last_in(session).rawValue != UInt32.max { replayable = nil }
            if !isClient { readEarlyData() }
            if rv == 0 { return try completeHandshake() }
            if !Self.isRetry(rv) && gnutls_error_is_fatal(rv) != 0 {
                _ = gnutls_alert_send_appropriate(session, rv)  // tell the peer why (queued as ciphertext)
                throw fail(QUICTLSSession.handshakeFailure(session, tlsError: rv, serverName: serverName))
            }
            if handshakeInput > handshakeInputLimit || bufferedCiphertext > handshakeInputLimit {
                throw fail(
                    TransportError(
                        .protocolViolation,
                        "the peer sent more than \(handshakeInputLimit / 1024) KiB of TLS without completing the "
                            + "handshake (a ClientHello or server flight is never that large); closed"))
            }
            if inboundStart == consumedBefore { return }
        }
    }

    /// Whether this session resumed from a ticket (valid after the handshake).
    package var isResumed: Bool { QUICTLSSession.isResumed(session) }

    private func completeHandshake() throws(TransportError) {
        if let alpn, QUICTLSSession.selectedALPN(session) != alpn {
            throw fail(
                TransportError(
                    .alpnMismatch,
                    "the server did not select the application protocol \(alpn) "
                        + "(ALPN); it does not speak this protocol over TLS"))
        }
        isHandshakeComplete = true
        events.append(.handshakeCompleted)
    }

    /// Server: moves accepted early data out of GnuTLS (it buffers it while waiting for EndOfEarlyData).
    private func readEarlyData() {
        while true {
            let rv = scratch.withUnsafeMutableBytes {
                gnutls_record_recv_early_data(session, $0.baseAddress, $0.count)
            }
            guard rv > 0 else { return }
            events.append(.earlyPlaintext(Array(scratch[..<rv])))
        }
    }

    private func readRecords() throws(TransportError) {
        while true {
            let progressMark = (inboundStart, events.count)
            let rv = scratch.withUnsafeMutableBytes { gnutls_record_recv(session, $0.baseAddress, $0.count) }
            if rv > 0 {
                events.append(.plaintext(Array(scratch[..<rv])))
            } else if rv == 0 {
                events.append(.closeNotify)
                return
            } else if Self.isRetry(Int32(rv)) {
                // GnuTLS also answers "again" after a post-handshake message (a ticket) with records still
                // buffered behind it: read on while a call made progress.
                if progressMark == (inboundStart, events.count) && gnutls_record_check_pending(session) == 0 { return }
            } else if gnutls_error_is_fatal(Int32(rv)) != 0 {
                throw fail(
                    TransportError(
                        .tlsFailure, "the TLS stream failed: \(gnutlsDescription(Int32(rv)))",
                        libraryCode: Int(rv)))
            }
        }
    }

    private static func isRetry(_ rv: Int32) -> Bool {
        rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED || rv == GNUTLS_E_TIMEDOUT
    }

    private func fail(_ error: TransportError) -> TransportError {
        if failure == nil { failure = error }
        return failure!
    }

    // MARK: - GnuTLS callbacks

    /// Memory transport: GnuTLS pushes ciphertext into `outbound` and pulls from `inbound`.
    private func attachTransport() {
        // Unretained: this object owns the session, so it is alive whenever GnuTLS calls these functions.
        let pointer = Unmanaged.passUnretained(self).toOpaque()
        gnutls_transport_set_ptr(session, pointer)
        gnutls_session_set_ptr(session, pointer)
        gnutls_transport_set_push_function(session) { pointer, data, length in
            let owner = Unmanaged<TLSStreamSession>.fromOpaque(pointer!).takeUnretainedValue()
            owner.outbound.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
            return length
        }
        gnutls_transport_set_pull_function(session) { pointer, data, length in
            let owner = Unmanaged<TLSStreamSession>.fromOpaque(pointer!).takeUnretainedValue()
            let available = owner.inbound.count - owner.inboundStart
            guard available > 0 else {
                gnutls_transport_set_errno(owner.session, EAGAIN)
                return -1
            }
            let count = min(available, length)
            owner.inbound.withUnsafeBytes { buffer in
                data!.copyMemory(from: buffer.baseAddress! + owner.inboundStart, byteCount: count)
            }
            owner.inboundStart += count
            if !owner.isHandshakeComplete { owner.handshakeInput += count }
            return count
        }
        gnutls_transport_set_pull_timeout_function(session) { pointer, _ in
            let owner = Unmanaged<TLSStreamSession>.fromOpaque(pointer!).takeUnretainedValue()
            return owner.inbound.count > owner.inboundStart ? 1 : 0
        }
    }

    /// Client: records each NewSessionTicket.
    private func installHook(_ type: UInt32) {
        gnutls_handshake_set_hook_function(session, type, Int32(GNUTLS_HOOK_POST)) { session, _, _, _, _ in
            let owner = Unmanaged<TLSStreamSession>.fromOpaque(gnutls_session_get_ptr(session)!).takeUnretainedValue()
            var data = gnutls_datum_t()
            guard gnutls_session_get_data2(session, &data) == 0, let bytes = data.data else { return 0 }
            owner.events.append(.sessionTicket(Array(UnsafeBufferPointer(start: bytes, count: Int(data.size)))))
            ptt_gnutls_free(bytes)
            return 0
        }
    }
}
