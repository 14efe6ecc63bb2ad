internal import CNgtcp2
internal import CTransportShims
import Glibc

/// One QUIC connection, sans-IO: it owns an `ngtcp2_conn` and its GnuTLS session, takes packets and timestamps in,
/// writes packets into a caller's buffer, and reports what happened as `QUICEvent`s.
///
/// - Important: Not thread-safe. Every call happens on the thread that owns the connection (the event loop in
///   production, the test in tests). ngtcp2 callbacks only record events; nothing here re-enters ngtcp2 from one.
package final class QUICConnection {
    package enum Role: Sendable { case client, server }

    package let role: Role
    package let parameters: QUICParameters
    /// The name the server's certificate was verified against (client only).
    package let serverName: String?

    var conn: OpaquePointer!  // ngtcp2_conn *
    var session: gnutls_session_t!
    /// The heap `ngtcp2_crypto_conn_ref` GnuTLS points to; stable address for the connection's life.
    let connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>
    /// The network path (local and remote address) with stable storage, passed on every read and write.
    let path: UnsafeMutablePointer<ngtcp2_path_storage>
    /// The frame guard every read and write passes to the crypto callbacks (it refuses packets that would reach one
    /// of ngtcp2 0.12.1's aborts, and records what the path rules need).
    let frameGuard: FrameGuard
    /// A server's rules for packets from another path (see `PathChangeRules`).
    var pathRules: PathChangeRules
    /// The time of the read in progress, for callbacks (ngtcp2 passes none).
    var lastReadTime: UInt64 = 0
    /// A server: ngtcp2's fallback path (the path left, or inherited; see `notePathAfterRead`), and the current path
    /// before a read from another path.
    let previousPath: UnsafeMutablePointer<ngtcp2_path_storage>
    let leavingPath: UnsafeMutablePointer<ngtcp2_path_storage>
    /// A server: the peer sent a PATH_CHALLENGE, from any path (ngtcp2 may have bound one of the peer's connection
    /// IDs to that path: it binds one only when answering a challenge).
    var peerSentPathChallenge = false
    /// A `path_validation` callback other than a success came during the current read (at a server: ngtcp2 dropped
    /// a validation that falls back, which a path change in that read inherits the fallback of).
    var validationDroppedDuringRead = false
    /// The length of the connection IDs this endpoint issues.
    static let serverIDLength = 18
    /// Derives the reset token of each connection ID issued (nil: a client's random tokens); a reload that rotated
    /// the relay's reset secret gives the new one to the open connections too.
    var statelessResetSecret: [UInt8]?

    /// The TLS context whose credentials the session uses: kept alive as long as the session.
    var tlsContext: AnyObject?
    /// Server: the keys sealing this session's tickets, those of its QUIC version (the session points at them).
    private var ticketKeys: ServerTicketKeys?
    /// The verified name as a C string: GnuTLS keeps this pointer for the session's life.
    var verifyHostname: UnsafeMutablePointer<CChar>?
    private var events = FIFOQueue<QUICEvent>()
    var sendBuffers: [Int64: StreamSendBuffer] = [:]
    /// Send buffers of streams the application can no longer write to, kept until ngtcp2 closes the stream.
    var retiredSendBuffers: [Int64: StreamSendBuffer] = [:]
    /// Bidirectional streams the peer opened (ngtcp2 called `stream_open`) and that are not closed yet: each one's
    /// close gives the peer credit for one more (ngtcp2 0.12.1 never raises the limit by itself).
    var peerOpenedStreams: Set<Int64> = []
    /// Bytes passed to the application in `.streamData` whose consumption it has not reported yet, per stream (no
    /// zero entries). They hold connection credit until `extendCredit` reports them, or until the receiving part
    /// is abandoned (our reset or STOP_SENDING, the peer's RESET_STREAM), which returns them at once: ngtcp2
    /// returns only what it never passed on.
    var applicationHeld: [Int64: UInt64] = [:]
    /// Streams with bytes or FIN to hand to ngtcp2, in round-robin order.
    var writableStreams: [Int64] = []
    var blockedStreams: Set<Int64> = []
    /// Outbound DATAGRAM frames: the one queue the application offers into (see `DatagramQueue`).
    package let datagrams: DatagramQueue
    var counters = QUICCounters()
    /// The reason the connection ended, once it has.
    package private(set) var closeReason: CloseReason? {
        didSet { isClosed = closeReason != nil }
    }
    /// Whether `closeReason` is set: what the packet path asks, without copying the reason.
    package private(set) var isClosed = false
    /// A CONNECTION_CLOSE packet to repeat while in the closing period.
    var closingPacket: [UInt8]?
    /// Where the pending CONNECTION_CLOSE goes (server), and which addresses may draw it (see `ClosingAnswers`).
    var closeRemote = SocketAddress()
    var closingAnswers = ClosingAnswers()
    /// A server: the peer's addresses, what each sent and which it proved (see `PeerAddresses`).
    var peerAddresses = PeerAddresses()
    /// The CONNECTION_CLOSE must be (re)sent.
    var pendingClosePacket = false
    /// Set by the `recv_stateless_reset` callback.
    var receivedStatelessReset = false
    /// Bytes written since ngtcp2's pacing was last updated (ngtcp2 counts the same bytes).
    var bytesSinceBurst = 0
    /// Set by a callback that must fail the connection with a specific error (e.g. the server sent no ALPN).
    var callbackFailure: TransportError?
    /// Called when ngtcp2 issues or retires a connection ID of ours (server demultiplexing), inside a callback.
    package var onConnectionIDChange: ((ConnectionID, _ added: Bool) -> Void)?
    /// What makes the connection IDs this connection issues (a server loop's: loop index, QUIC-LB; nil: random
    /// bytes from `parameters.random`).
    package private(set) var connectionIDs: (any ConnectionIDGenerator)?
    /// Client: the saved ticket was offered. Server: unused.
    package private(set) var resumptionOffered = false
    /// Client: 0-RTT is possible (ticket offered and the server's parameters known).
    package private(set) var earlyDataAttempted = false
    /// Client, after the handshake: whether the server accepted the early data (nil: not attempted / not yet).
    package private(set) var earlyDataAccepted: Bool?
    /// Client: why saved resumption data was not (fully) used, if it was not.
    package private(set) var resumptionDiagnostic: String?
    /// Server: makes the NEW_TOKEN sent after the handshake (bound to the client's address).
    package var makeNewToken: (() -> [UInt8]?)?
    /// This connection's qlog, when `parameters.qlog` made one (ngtcp2 writes it through a callback).
    var qlog: (any QlogSink)?
    /// Armed in ngtcp2 once the handshake completes (see `handshakeDidComplete`), never before.
    private var keepAliveInterval: UInt64?
    /// A liveness probe is out (`probeLiveness`): ngtcp2's keep-alive is short until the next packet is read.
    private var probingLiveness = false
    /// Written by the `handshake_completed` callback.
    var isHandshakeCompletedStorage = false
    package var isHandshakeCompleted: Bool { isHandshakeCompletedStorage }
    /// Written by the `handshake_confirmed` callback (client: HANDSHAKE_DONE arrived).
    var isHandshakeConfirmed = false
    /// Client: the local address a migration is validating (see `QUICConnection+Migration.swift`).
    var migrationTarget: SocketAddress?
    /// Client: how the last migration ended, until `takeMigrationOutcome()` reads it.
    var finishedMigration: MigrationOutcome?

    private init(
        role: Role, parameters: QUICParameters, serverName: String?, statelessResetSecret: [UInt8]?,
        local: SocketAddress, remote: SocketAddress
    ) {
        self.role = role
        self.parameters = parameters
        self.serverName = serverName
        self.statelessResetSecret = statelessResetSecret
        self.datagrams = DatagramQueue(capacity: parameters.datagramQueueCapacity)
        connRef = .allocate(capacity: 1)
        connRef.initialize(to: ngtcp2_crypto_conn_ref())
        path = .allocate(capacity: 1)
        path.initialize(to: ngtcp2_path_storage())
        previousPath = .allocate(capacity: 1)
        previousPath.initialize(to: ngtcp2_path_storage())
        leavingPath = .allocate(capacity: 1)
        leavingPath.initialize(to: ngtcp2_path_storage())
        frameGuard = FrameGuard(
            isClient: role == .client, checksRetirements: LinkedNgtcp2.has(.retiresTwice),
            awaitsConfirmation: LinkedNgtcp2.has(.earlyRetirementAsserts))
        pathRules = PathChangeRules(initialRTT: parameters.initialRTT ?? UInt64(NGTCP2_DEFAULT_INITIAL_RTT))
        setPath(local: local, remote: remote)
    }

    /// Starts a client connection: the first `writePacket` sends the Initial. With `resumption`, the ClientHello
    /// offers the saved ticket, the saved token skips address validation, the saved RTT seeds the estimate, and
    /// (when `resumption` carries the server's transport parameters) streams opened before the first write go
    /// out as 0-RTT. Unusable resumption data is reported in `resumptionDiagnostic` and the connection goes cold.
    /// The connection starts in the version the ticket was issued in, or drops it (see `ResumedVersion`).
    /// `connectionIDs` makes the source IDs it issues (nil: random bytes from `parameters.random`, which also
    /// makes the first destination ID).
    package convenience init(
        clientWith parameters: QUICParameters, tls: TLSClientContext, serverName: String,
        local: SocketAddress, remote: SocketAddress, now: UInt64, resumption: ClientResumption? = nil,
        connectionIDs: (any ConnectionIDGenerator)? = nil
    ) throws(TransportError) {
        try parameters.validate()  // the configured values; a saved RTT then overrides the configured one
        let resumed = ResumedVersion(parameters: parameters, resumption: resumption)
        var parameters = resumed.parameters
        let resumption = resumed.resumption
        if let rtt = resumption?.smoothedRTT, rtt > 0 { parameters.initialRTT = rtt }
        self.init(
            role: .client, parameters: parameters, serverName: serverName, statelessResetSecret: nil,
            local: local, remote: remote)
        try installConnRef()
        self.connectionIDs = connectionIDs
        let dcid = ConnectionID.random(length: 18, using: parameters.random).ngtcp2
        let scid = (connectionIDs?.makeID() ?? ConnectionID.random(length: 18, using: parameters.random)).ngtcp2
        var callbacks = QUICCallbacks.make(role: .client)
        var settings = parameters.settings(now: now, isServer: false)
        useRandomSource(&settings)
        startQlog(&settings, originalDCID: dcid)
        var params = parameters.transportParameters()
        var conn: OpaquePointer?
        var token = resumption?.token ?? []
        let rv = token.withUnsafeMutableBufferPointer { tokenBuffer in  // ngtcp2 copies the token
            if !tokenBuffer.isEmpty {
                ptt_settings_set_token(&settings, tokenBuffer.baseAddress, tokenBuffer.count)
            }
            return withUnsafePointer(to: dcid) { dcid in
                withUnsafePointer(to: scid) { scid in
                    ptt_conn_client_new(
                        &conn, dcid, scid, &path.pointee.path, parameters.quicVersion, &callbacks, &settings, &params,
                        Unmanaged.passUnretained(self).toOpaque())
                }
            }
        }
        guard rv == 0, let conn else { throw ngtcp2Failure(rv, "creating the client connection") }
        self.conn = conn
        tlsContext = tls
        verifyHostname = strdup(serverName)
        session = try QUICTLSSession.client(
            context: tls, serverName: serverName, hostname: verifyHostname!,
            alpn: parameters.alpn,
            connRef: UnsafeMutableRawPointer(connRef))
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(session))
        keepAliveInterval = parameters.keepAliveInterval
        if let droppedBecause = resumed.droppedBecause {
            resumptionDiagnostic = droppedBecause
        } else if let resumption {
            applyResumption(resumption)
        }
    }

    /// Offers the saved ticket and, when the server's parameters decode, enables 0-RTT.
    private func applyResumption(_ resumption: ClientResumption) {
        guard !resumption.ticket.isEmpty, QUICTLSSession.setResumptionData(session, resumption.ticket) else {
            resumptionDiagnostic = "the saved TLS ticket could not be loaded; connecting with a full handshake"
            return
        }
        resumptionOffered = true
        guard !resumption.transportParameters.isEmpty else { return }
        let rv = resumption.transportParameters.withUnsafeBufferPointer {
            ptt_conn_set_0rtt_transport_params(conn, $0.baseAddress, $0.count)
        }
        guard rv == 0 else {
            resumptionDiagnostic = "the saved transport parameters are malformed; resuming without 0-RTT"
            return
        }
        earlyDataAttempted = true
    }

    /// Accepts a server connection for a client Initial `header` that `ngtcp2_accept` validated.
    convenience init(
        serverWith parameters: QUICParameters, tls: TLSServerContext, header: ngtcp2_pkt_hd,
        originalDCID: ConnectionID?, retrySCID: ConnectionID?, token: [UInt8]?,
        statelessResetSecret: [UInt8], local: SocketAddress, remote: SocketAddress, now: UInt64,
        connectionIDs: (any ConnectionIDGenerator)? = nil
    ) throws(TransportError) {
        self.init(
            role: .server, parameters: parameters, serverName: nil, statelessResetSecret: statelessResetSecret,
            local: local, remote: remote)
        try installConnRef()
        self.connectionIDs = connectionIDs

        let scid = connectionIDs?.makeID() ?? ConnectionID.random(length: 18, using: parameters.random)
        var callbacks = QUICCallbacks.make(role: .server)
        var settings = parameters.settings(now: now, isServer: true, clientVersion: header.version)
        useRandomSource(&settings)
        startQlog(&settings, originalDCID: (originalDCID ?? ConnectionID(header.dcid)).ngtcp2)
        var tokenStorage = token ?? []
        var params = parameters.transportParameters()
        var originalID = (originalDCID ?? ConnectionID(header.dcid)).ngtcp2
        ptt_transport_params_set_original_dcid(&params, &originalID)
        if let retrySCID {
            params.retry_scid = retrySCID.ngtcp2
            params.retry_scid_present = 1
        }
        params.stateless_reset_token_present = 1
        let resetToken = Self.statelessResetToken(secret: statelessResetSecret, cid: scid)
        withUnsafeMutableBytes(of: &params.stateless_reset_token) { $0.copyBytes(from: resetToken) }
        var conn: OpaquePointer?
        var clientSCID = header.scid
        var ourSCID = scid.ngtcp2
        let rv = tokenStorage.withUnsafeMutableBufferPointer { tokenBuffer -> Int32 in
            if !tokenBuffer.isEmpty {
                ptt_settings_set_token(&settings, tokenBuffer.baseAddress, tokenBuffer.count)
            }
            return ptt_conn_server_new(
                &conn, &clientSCID, &ourSCID, &path.pointee.path, header.version,
                &callbacks, &settings, &params, Unmanaged.passUnretained(self).toOpaque())
        }
        guard rv == 0, let conn else { throw ngtcp2Failure(rv, "creating the server connection") }
        self.conn = conn
        tlsContext = tls
        let tickets = try tls.tickets.bound(toQUICVersion: header.version)
        ticketKeys = tickets
        session = try QUICTLSSession.server(
            context: tls, tickets: tickets, alpn: [parameters.alpn] + parameters.additionalALPNs,
            connRef: UnsafeMutableRawPointer(connRef))
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(session))
        keepAliveInterval = parameters.keepAliveInterval
    }

    deinit {
        if let conn { ngtcp2_conn_del(conn) }  // writes the qlog's last records (FIN), which finishes the sink
        if let session { gnutls_deinit(session) }
        free(verifyHostname)
        connRef.deallocate()
        path.deallocate()
        previousPath.deallocate()
        leavingPath.deallocate()
    }

    private func installConnRef() throws(TransportError) {
        connRef.pointee.get_conn = { ref in
            // Unretained: the connection owns the TLS session that holds this pointer, so it outlives every call.
            Unmanaged<QUICConnection>.fromOpaque(ref!.pointee.user_data).takeUnretainedValue().conn
        }
        connRef.pointee.user_data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Points ngtcp2's `rand` callback at `parameters.random` (the callback finds this connection in `rand_ctx`).
    private func useRandomSource(_ settings: inout ngtcp2_settings) {
        // Unretained: the connection owns the `ngtcp2_conn` whose callbacks read this pointer.
        settings.rand_ctx.native_handle = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Makes this connection's qlog sink and points ngtcp2's qlog writer at it, when `parameters.qlog` is set.
    private func startQlog(_ settings: inout ngtcp2_settings, originalDCID: ngtcp2_cid) {
        guard let writer = parameters.qlog?(ConnectionID(originalDCID), role == .client) else { return }
        qlog = writer
        var originalDCID = originalDCID
        ptt_settings_set_qlog(&settings, &originalDCID) { userData, flags, data, length in
            guard let userData else { return }
            let chunk = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length)
            let fin = flags & UInt32(NGTCP2_QLOG_WRITE_FLAG_FIN) != 0
            // Unretained and without retaining: ngtcp2 also calls this from `ngtcp2_conn_del` in `deinit`.
            Unmanaged<QUICConnection>.fromOpaque(userData)._withUnsafeGuaranteedRef { $0.qlog?.write(chunk, fin: fin) }
        }
    }

    private func setPath(local: SocketAddress, remote: SocketAddress) {
        fillPathStorage(path, local, remote)
    }

    // MARK: - Inputs

    /// Feeds one received UDP payload. Malformed packets are dropped by ngtcp2; a fatal error closes the
    /// connection (a CONNECTION_CLOSE is queued for `flush`) and is reported as `.closed`.
    package func receive(
        packet: UnsafeRawBufferPointer, from remote: SocketAddress, to local: SocketAddress,
        ecn: UInt32 = 0, now: UInt64
    ) {
        guard !isClosed, !packet.isEmpty else { return }  // read_pkt rejects empty payloads
        counters.packetsReceived += 1
        counters.bytesReceived += UInt64(packet.count)
        if role == .server { peerAddresses.received(packet.count, from: remote) }
        var packetPath = ngtcp2_path_storage()
        fillPathStorage(&packetPath, local, remote)
        let fromCurrentPath = isCurrentPath(&packetPath.path)
        guard admitsPacket(packet, on: &packetPath.path, local: local, fromCurrentPath: fromCurrentPath, now: now)
        else { return }
        if !fromCurrentPath { rememberPathBeforeRead() }
        lastReadTime = now
        let rv = ptt_conn_read_pkt(
            conn, frameGuard.state, &packetPath.path, ecn,
            packet.baseAddress!.assumingMemoryBound(to: UInt8.self), packet.count, now)
        frameGuard.dropsPathResponses = false
        frameGuard.dropsNewConnectionIDs = false
        if rv != 0 { return handleReadError(rv, now: now) }
        if probingLiveness { endLivenessProbe() }
        notePathAfterRead(packet, wasCurrentPath: fromCurrentPath, packetPath: &packetPath.path)
    }

    /// Server: whether GnuTLS read the client's ClientHello whole (processed, refused, or ended to ask the
    /// anti-replay store); until then the client's first flight is still arriving.
    package var clientHelloRead: Bool {
        guard role == .server, let session else { return true }
        return gnutls_handshake_get_last_in(session).rawValue != UInt32.max
    }

    /// When the last packet from the peer was read (0: none yet).
    package var lastPacketRead: UInt64 { lastReadTime }

    /// Makes the peer show it is alive: after the handshake, a keep-alive PING leaves at the next write (ngtcp2's
    /// keep-alive is set to 1 ms past the last packet read, which is longer ago) and the peer's ACK comes back within
    /// about a round trip; ngtcp2 retransmits the PING on loss like any ack-eliciting packet. The next packet read
    /// restores the configured keep-alive, so one probe costs one PING.
    package func probeLiveness() {
        guard isHandshakeCompleted, !isClosed else { return }
        probingLiveness = true
        ngtcp2_conn_set_keep_alive_timeout(conn, 1_000_000)
    }

    /// Back to the configured keep-alive; without one, to an hour (ngtcp2 0.x and 1.x spell "off" differently, and
    /// an hour without a packet from the peer outlasts any idle timeout this library sets).
    private func endLivenessProbe() {
        probingLiveness = false
        ngtcp2_conn_set_keep_alive_timeout(conn, keepAliveInterval ?? 3_600_000_000_000)
    }

    /// Runs ngtcp2's timers (loss detection, ACK delay, idle and handshake timeouts, keep-alive).
    package func handleTimeout(now: UInt64) {
        guard !isClosed else { return }
        var rv = ngtcp2_conn_handle_expiry(conn, now)
        if rv == 0, LinkedNgtcp2.has(.expiryOneEarly), let next = nextTimeout, next <= now {
            // ngtcp2 0.12.1 reports a retired connection ID's expiry as "retired + PTO" but removes the ID only
            // once that time has passed, so a timer that fires exactly on time would fire again and again (a
            // virtual clock always does; a migration retires an ID). One nanosecond later it is handled.
            rv = ngtcp2_conn_handle_expiry(conn, now + 1)
        }
        guard rv != 0 else { return }
        switch rv {
        case NGTCP2_ERR_IDLE_CLOSE: finish(.idleTimeout)
        case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
            finish(
                .failed(
                    TransportError(
                        .handshakeTimeout,
                        "no QUIC handshake completed within \(parameters.handshakeTimeout / nanosecondsPerMillisecond) ms; "
                            + "the server may be down or UDP blocked", libraryCode: Int(rv))))
        default: failWithClose(ngtcp2Failure(rv, "handling a timer"), liberr: rv, now: now)
        }
    }

    /// When `handleTimeout` should run next (nil: nothing scheduled), in the same clock as `now`.
    package var nextTimeout: UInt64? {
        guard !isClosed, let conn else { return nil }
        let expiry = ngtcp2_conn_get_expiry(conn)
        return expiry == UInt64.max ? nil : expiry
    }

    // MARK: - Events

    package func nextEvent() -> QUICEvent? { events.popFirst() }

    func record(_ event: QUICEvent) { events.append(event) }

    /// Server, before the ticket goes out: a ticket belongs to the version the connection ended in (RFC 9369 §5),
    /// which compatible negotiation may have changed since the session took the client's first version's keys.
    /// False when the keys cannot follow (GnuTLS already used them): the connection then issues no ticket.
    private func ticketKeysFollowTheNegotiatedVersion() -> Bool {
        let negotiated = ngtcp2_conn_get_negotiated_version(conn)
        guard negotiated != ngtcp2_conn_get_client_chosen_version(conn) else { return true }
        guard let tls = tlsContext as? TLSServerContext, let keys = try? tls.tickets.bound(toQUICVersion: negotiated),
            QUICTLSSession.switchTicketKeys(session, to: keys)
        else { return false }
        ticketKeys = keys
        return true
    }

    /// The handshake finished (inside the callback). Client: settles 0-RTT. Server: sends a session ticket and a
    /// NEW_TOKEN. Both are what ngtcp2's own examples do from this callback.
    func handshakeDidComplete() -> Int32 {
        switch role {
        case .client:
            if earlyDataAttempted {
                let accepted = QUICTLSSession.earlyDataAccepted(session)
                earlyDataAccepted = accepted
                if !accepted {
                    let rv = ptt_conn_early_data_rejected(conn)  // calls back `earlyDataWasRejected`
                    if rv != 0 { return rv }
                }
            }
        case .server:
            if ticketKeysFollowTheNegotiatedVersion() { _ = QUICTLSSession.sendSessionTicket(session) }
            if let token = makeNewToken?(), !token.isEmpty {
                _ = token.withUnsafeBufferPointer { ngtcp2_conn_submit_new_token(conn, $0.baseAddress, $0.count) }
            }
        }
        // Keep-alive starts only now: ngtcp2 0.12.1 would otherwise send a keep-alive PING alone in a 0-RTT
        // packet during a long resumed handshake, too short for the header-protection sample, and abort in
        // `ngtcp2_ppe_final` (seen with a 300 ms keep-alive on a path that had gone silent). Kept on 1.x, where it
        // costs nothing: a keep-alive has nothing to keep alive before the handshake completes.
        if let interval = keepAliveInterval { ngtcp2_conn_set_keep_alive_timeout(conn, interval) }
        record(.handshakeCompleted)
        return 0
    }

    /// 0-RTT was rejected: ngtcp2 forgot the early streams and their data. Reopen them (IDs restart at 0, so
    /// opening in the same order gives the same IDs) and send everything again in 1-RTT.
    func earlyDataWasRejected() {
        for id in sendBuffers.keys.sorted() {
            var reopened: Int64 = -1
            if ngtcp2_conn_open_bidi_stream(conn, &reopened, nil) != 0 || reopened != id {
                dropSendState(id)  // cannot happen for streams opened in 0-RTT order; never resend into a wrong ID
                continue
            }
            sendBuffers[id]!.rewindForResend()
            markWritable(id)
        }
        blockedStreams.removeAll()
        record(.earlyDataRejected)
    }

    /// Ends the connection once, reporting why.
    func finish(_ reason: CloseReason) {
        guard !isClosed else { return }
        closeReason = reason
        datagrams.fail(reason.error)
        qlog?.flush()  // the process may exit before the connection is freed (and the qlog finished)
        record(.closed(reason))
    }

    // MARK: - Errors

    private func handleReadError(_ rv: Int32, now: UInt64) {
        if role == .server, (tlsContext as? TLSServerContext)?.antiReplay?.isHoldingForClaim == true {
            // The handshake ended to ask a shared anti-replay store: nothing was sent, nothing is (the endpoint
            // holds the flight and feeds it to a new connection with the answer).
            return finish(
                .failed(TransportError(.tlsFailure, "first flight held while the anti-replay store is asked")))
        }
        switch rv {
        case NGTCP2_ERR_DRAINING:
            finish(
                receivedStatelessReset
                    ? .failed(
                        TransportError(
                            .connectionReset,
                            "the server reset the connection (it no longer knows it, e.g. after a restart); reconnect"))
                    : peerCloseReason())
        case NGTCP2_ERR_DROP_CONN:
            finish(
                .failed(
                    TransportError(
                        .protocolViolation, "the connection was dropped after an invalid packet",
                        libraryCode: Int(rv))))
        case NGTCP2_ERR_CRYPTO:
            let tlsError = ngtcp2_conn_get_tls_error(conn)
            let error = QUICTLSSession.handshakeFailure(session, tlsError: tlsError, serverName: serverName)
            var ccerr = ptt_ccerr()
            ptt_ccerr_set_tls_alert(&ccerr, ngtcp2_conn_get_tls_alert(conn), nil, 0)
            writeClose(&ccerr, now: now)
            finish(.failed(error))
        case NGTCP2_ERR_RECV_VERSION_NEGOTIATION:  // nothing to close: the server kept no state (RFC 9000 §6.2)
            finish(
                .failed(
                    TransportError(
                        .protocolViolation,
                        "the server does not speak QUIC \(ResumedVersion.name(parameters.quicVersion)) (it answered "
                            + "with Version Negotiation)", libraryCode: Int(rv))))
        case NGTCP2_ERR_CALLBACK_FAILURE where frameGuard.refusal != nil:
            closeRefused(frameGuard.refusal!, now: now)
        case NGTCP2_ERR_CALLBACK_FAILURE where callbackFailure != nil:
            var ccerr = ptt_ccerr()
            ptt_ccerr_set_tls_alert(&ccerr, 120, nil, 0)  // no_application_protocol
            writeClose(&ccerr, now: now)
            finish(.failed(callbackFailure!))
        default:
            // Every other error closes the connection, as ngtcp2's contract for read_pkt requires (packets that
            // fail decryption or are duplicates never get here: ngtcp2 drops them and returns 0). Keeping the
            // connection after, say, a PROTOCOL_VIOLATION in the packet that carried the client's Finished would
            // leave a server connection whose TLS finished but whose state never reached "post-handshake"; an
            // application close there aborts 0.12.1 (assert in ngtcp2_conn_write_application_close_pkt).
            failWithClose(ngtcp2Failure(rv, "processing a packet"), liberr: rv, now: now)
        }
    }

    /// A fatal local error: send CONNECTION_CLOSE with the matching transport error code, then end.
    func failWithClose(_ error: TransportError, liberr: Int32, now: UInt64) {
        var ccerr = ptt_ccerr()
        ptt_ccerr_set_liberr(&ccerr, liberr, nil, 0)
        writeClose(&ccerr, now: now)
        finish(.failed(error))
    }

    private func peerCloseReason() -> CloseReason {
        var ccerr = ptt_ccerr()
        ptt_conn_get_ccerr(conn, &ccerr)
        let reason =
            ccerr.reason.map {
                String(decoding: UnsafeBufferPointer(start: $0, count: ccerr.reasonlen), as: UTF8.self)
            } ?? ""
        if ptt_ccerr_is_application(&ccerr) != 0 {
            return .peer(code: ccerr.error_code, reason: reason)
        }
        let code = ccerr.error_code
        if code == 0 { return .peer(code: 0, reason: reason) }
        if code == 0x100 + 120 {
            return .failed(
                TransportError(
                    .alpnMismatch,
                    "the peer refused the application protocol \(parameters.alpn) (no_application_protocol)",
                    transportErrorCode: code))
        }
        if (0x100...0x1ff).contains(code) {
            return .failed(
                TransportError(
                    .tlsFailure,
                    "the peer aborted the TLS handshake with alert \(code - 0x100)"
                        + (reason.isEmpty ? "" : ": \(reason)"), transportErrorCode: code))
        }
        if code == 0x2 {
            return .failed(
                TransportError(
                    .connectionRefused,
                    "the server refused the connection"
                        + (reason.isEmpty ? "" : ": \(reason)"), transportErrorCode: code))
        }
        return .failed(
            TransportError(
                .closedByPeer,
                "the peer closed the connection with transport error 0x"
                    + String(code, radix: 16) + (reason.isEmpty ? "" : ": \(reason)"), transportErrorCode: code))
    }

    func ngtcp2Failure(_ rv: Int32, _ what: String) -> TransportError {
        let text = ngtcp2_strerror(rv).map { String(cString: $0) } ?? "error \(rv)"
        let code: TransportError.Code =
            switch rv {
            case NGTCP2_ERR_NOMEM, NGTCP2_ERR_INTERNAL, NGTCP2_ERR_INVALID_ARGUMENT, NGTCP2_ERR_INVALID_STATE:
                .internalError
            default: .protocolViolation
            }
        return TransportError(code, "\(what) failed: \(text)", libraryCode: Int(rv))
    }

    /// Derives the stateless-reset token for one of our connection IDs from the persisted secret.
    static func statelessResetToken(secret: [UInt8], cid: ConnectionID) -> [UInt8] {
        var token = [UInt8](repeating: 0, count: Int(NGTCP2_STATELESS_RESET_TOKENLEN))
        var ngcid = cid.ngtcp2
        _ = ngtcp2_crypto_generate_stateless_reset_token(&token, secret, secret.count, &ngcid)
        return token
    }
}

/// Counters behind `ConnectionStatistics`.
package struct QUICCounters: Sendable {
    package var packetsSent: UInt64 = 0
    package var packetsReceived: UInt64 = 0
    package var bytesSent: UInt64 = 0
    package var bytesReceived: UInt64 = 0
    package var datagramsSent: UInt64 = 0
    package var datagramsReceived: UInt64 = 0
    package var datagramsAcknowledged: UInt64 = 0
    package var datagramsLost: UInt64 = 0
    package var datagramsRejected: UInt64 = 0
    /// Client migrations whose new path was validated.
    package var migrations: UInt64 = 0
    /// Key updates this endpoint started (`initiateKeyUpdate`).
    package var keyUpdates: UInt64 = 0
}

/// Fills an ngtcp2 path storage from two socket addresses.
func fillPathStorage(
    _ storage: UnsafeMutablePointer<ngtcp2_path_storage>, _ local: SocketAddress,
    _ remote: SocketAddress
) {
    local.withSockAddr { localAddr, localLength in
        remote.withSockAddr { remoteAddr, remoteLength in
            ngtcp2_path_storage_init(storage, localAddr, localLength, remoteAddr, remoteLength, nil)
        }
    }
}
