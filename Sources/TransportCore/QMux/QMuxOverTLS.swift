/// A QMux connection over TLS 1.3 — the TCP fallback path — sans-IO: ciphertext in (`receive`), ciphertext out
/// (`takeCiphertext`), the same `QUICEvent`s as a `QUICConnection`, so one driver shape serves both paths.
///
/// It is ready (`.handshakeCompleted`) once TLS completed (certificate, name and ALPN verified) and the peer's
/// QX_TRANSPORT_PARAMETERS arrived; before that, stream data and datagrams wait (draft-ietf-quic-qmux-01 §4.2).
/// Stream data is delivered in order.
///
/// 0-RTT (draft-ietf-quic-qmux-01 §"Using 0-RTT"): a resuming client that remembers the server's transport
/// parameters sends its QX_TRANSPORT_PARAMETERS and the early stream's bytes as TLS early data, within the
/// remembered limits. A server with an anti-replay store accepts it at most once and delivers it (flagged
/// `isEarly`) when its handshake completes — GnuTLS 3.7.9 cannot send before the client's Finished on a resumed
/// session, so the answer leaves with the server's first application flight either way. If the server rejects
/// the early data, this connection starts a fresh QMux session and re-sends the same bytes on the same stream ID
/// once the server's parameters arrive, so they are delivered exactly once.
package final class QMuxOverTLS {
    /// The TLS session (server: replaced by a fresh one when a first flight held for its ticket's claim is fed
    /// again, see `claimAnswered`).
    private(set) var tls: TLSStreamSession
    /// Server: the context its sessions are made from, and the ALPN they select.
    private let serverContext: TLSServerContext?
    /// Server: the claim held for whose start the owner has not been asked yet (`takeClaimToStart`), and the last
    /// one announced (each is announced once).
    private var claimToStart: ZeroRTTClaim?
    private weak var announcedClaim: ZeroRTTClaim?
    var qmux: QMuxConnection
    package let isClient: Bool
    private let localParameters: QMuxTransportParameters
    private let keepAliveInterval: UInt64?
    /// Client 0-RTT: the stream the early bytes went on, and the bytes (kept for a re-send after rejection).
    package private(set) var earlyStreamID: Int64?
    private var earlyStreamBytes: [UInt8] = []
    private var resendAfterRejection = false
    /// Server: accepted early data, delivered when the handshake completes.
    private var earlyPlaintext: [UInt8] = []
    private var events = FIFOQueue<QUICEvent>()
    /// Set once the connection ended; no event follows `.closed`.
    package private(set) var closeReason: CloseReason?
    /// TLS completed and the peer's transport parameters arrived.
    package private(set) var isReady = false
    private let handshakeDeadline: UInt64
    private var closeNotifySent = false
    package private(set) var bytesReceived: UInt64 = 0
    package private(set) var bytesSent: UInt64 = 0
    package private(set) var datagramsSent: UInt64 = 0
    package private(set) var datagramsReceived: UInt64 = 0
    /// Datagrams the application gave before the connection was ready that could not be sent once it was.
    package private(set) var datagramsRejected: UInt64 = 0

    /// The ALPN for QMux derived from the QUIC one: `<quic-alpn>-qx01` (`ptt/1` → `ptt/1-qx01`), naming the
    /// draft version as draft-ietf-quic-qmux-01 advises, so a QMux peer of another draft version fails ALPN.
    package static func alpn(forQUIC alpn: String) -> String { alpn + "-qx01" }

    /// A client connection; `ticket` (a previous `.sessionTicket`) resumes TLS. With `rememberedParameters` (the
    /// server's encoded parameters from the connection that issued the ticket, `encodedPeerTransportParameters`)
    /// and `earlyStreamBytes`, those bytes go on a new stream as 0-RTT when the ticket allows early data
    /// (`earlyStreamID` is then set; check `earlyDataAccepted` once ready).
    package init(
        client context: TLSClientContext, serverName: String, parameters: QUICParameters,
        ticket: [UInt8]?, now: UInt64, rememberedParameters: [UInt8] = [],
        earlyStreamBytes: [UInt8] = []
    ) throws(TransportError) {
        tls = try TLSStreamSession(
            client: context, serverName: serverName,
            alpn: Self.alpn(forQUIC: parameters.alpn), ticket: ticket)
        serverContext = nil
        localParameters = Self.localParameters(parameters)
        keepAliveInterval = parameters.keepAliveInterval
        qmux = QMuxConnection(
            role: .client, localParameters: localParameters, now: now,
            keepAliveInterval: keepAliveInterval)
        isClient = true
        handshakeDeadline = now &+ parameters.handshakeTimeout
        if ticket?.isEmpty == false, !rememberedParameters.isEmpty, !earlyStreamBytes.isEmpty {
            attemptEarlyData(rememberedParameters: rememberedParameters, streamBytes: earlyStreamBytes, now: now)
        }
    }

    /// Frames our parameters and the early stream under the remembered limits and queues them as TLS early
    /// data; on any obstacle (unreadable parameters, too little credit, a ticket without early data) the
    /// connection stays a plain 1-RTT one.
    private func attemptEarlyData(rememberedParameters: [UInt8], streamBytes: [UInt8], now: UInt64) {
        guard let remembered = try? QMuxTransportParameters.decode(rememberedParameters[...]) else { return }
        let candidate = QMuxConnection(
            role: .client, localParameters: localParameters, now: now,
            keepAliveInterval: keepAliveInterval, rememberedPeerParameters: remembered)
        guard let id = try? candidate.openBidirectionalStream(),
            (try? candidate.write(stream: id, streamBytes, fin: false)) != nil
        else { return }
        let early = candidate.takeOutput(now: now)
        guard candidate.queuedBytes(stream: id) == 0, tls.sendEarly(early) else { return }
        qmux = candidate
        earlyStreamID = id
        earlyStreamBytes = streamBytes
    }

    /// Client, once ready: nil when no early data was sent, else whether the server accepted it.
    package var earlyDataAccepted: Bool? {
        guard tls.earlyDataAttempted, tls.isHandshakeComplete else { return nil }
        return tls.earlyDataAccepted
    }

    /// The peer's transport parameters as received (to remember for 0-RTT), empty until they arrived.
    package var encodedPeerTransportParameters: [UInt8] { qmux.peerParameters?.encode() ?? [] }

    /// A server connection for one accepted TCP connection.
    package init(server context: TLSServerContext, parameters: QUICParameters, now: UInt64) throws(TransportError) {
        tls = try TLSStreamSession(server: context, alpn: Self.alpn(forQUIC: parameters.alpn))
        serverContext = context
        localParameters = Self.localParameters(parameters)
        keepAliveInterval = nil
        qmux = QMuxConnection(role: .server, localParameters: localParameters, now: now)
        isClient = false
        handshakeDeadline = now &+ parameters.handshakeTimeout
    }

    static func localParameters(_ parameters: QUICParameters) -> QMuxTransportParameters {
        QMuxTransportParameters(
            maxIdleTimeout: parameters.idleTimeout / nanosecondsPerMillisecond,
            initialMaxData: parameters.initialMaxData,
            initialMaxStreamDataBidiLocal: parameters.initialMaxStreamData,
            initialMaxStreamDataBidiRemote: parameters.initialMaxStreamData,
            initialMaxStreamDataUni: parameters.acceptsRelayNotices ? UInt64(RelayNotice.maximumLength) : 0,
            initialMaxStreamsBidi: parameters.maxBidirectionalStreams,
            initialMaxStreamsUni: parameters.acceptsRelayNotices ? 1 : 0,
            maxDatagramFrameSize: parameters.maxDatagramFrameSize)
    }

    // MARK: - Input

    /// Ciphertext read from TCP. Errors end the connection (reported as `.closed(.failed)`), never throw.
    package func receive(_ ciphertext: UnsafeRawBufferPointer, now: UInt64) {
        guard closeReason == nil else { return }
        bytesReceived += UInt64(ciphertext.count)
        tls.receive(ciphertext)
        if let claim = tls.heldClaim {
            guard tls.heldInputOverflowed else { return }  // held: the bytes wait with the flight
            serverContext?.zeroRTTAdmission?.count(.notHeld)
            return claimAnswered(claim, accepted: false, now: now)
        }
        advance(now: now)
    }

    // MARK: - 0-RTT held for a shared anti-replay store

    /// Server: the claim to start when the first flight is held for its ticket (see `GnuTLSAntiReplay`), once:
    /// claim it (`zeroRTTAdmission`) and call `claimAnswered` with the answer.
    package func takeClaimToStart() -> ZeroRTTClaim? {
        defer { claimToStart = nil }
        return claimToStart
    }

    /// Server: what decides 0-RTT (nil without early data).
    package var zeroRTTAdmission: (any ZeroRTTAdmission)? { serverContext?.zeroRTTAdmission }

    /// Server: the store answered `claim` (or its flight grew past the bound: refused). Feeds what the client sent
    /// so far to a fresh TLS session that takes the answer for that ticket; nothing when the claim is not this
    /// connection's current one (the connection moved on or ended).
    package func claimAnswered(_ claim: ZeroRTTClaim, accepted: Bool, now: UInt64) {
        guard closeReason == nil, tls.heldClaim === claim, let input = tls.heldInput, let context = serverContext,
            let alpn = tls.alpn  // a server session always has its one ALPN
        else { return }
        do {
            tls = try TLSStreamSession(server: context, alpn: alpn)
        } catch {
            return end(.failed(error))
        }
        context.deciding(claim, accepted: accepted) {
            input.withUnsafeBytes { tls.receive($0) }
            advance(now: now)
        }
    }

    /// When the last QMux frame from the peer was read.
    package var lastFrameRead: UInt64 { qmux.lastReceive }

    /// Makes the peer show it is alive: one QX_PING request, which a live peer answers at once (its response is a
    /// frame read, see `lastFrameRead`). Nothing before the connection is ready or after it closed.
    package func probeLiveness() {
        guard isReady, closeReason == nil else { return }
        _ = try? qmux.ping()
    }

    /// TCP reached end of stream (or failed) without a CONNECTION_CLOSE.
    package func transportEnded(now: UInt64, error: TransportError? = nil) {
        guard closeReason == nil else { return }
        if let error {
            end(.failed(error))
        } else if !tls.isHandshakeComplete {
            end(
                .failed(
                    TransportError(
                        .connectionReset,
                        "the server closed the TCP connection during the TLS handshake (is it a QMux server?)")))
        } else {
            qmux.transportClosed(now: now)
            drainQMuxEvents()
        }
    }

    private func advance(now: UInt64) {
        let tlsEvents: [TLSStreamEvent]
        do {
            tlsEvents = try tls.advance()
        } catch {
            end(.failed(error))
            return
        }
        if let claim = tls.heldClaim {
            if announcedClaim !== claim {
                announcedClaim = claim
                claimToStart = claim
            }
            return
        }
        for event in tlsEvents {
            switch event {
            case .earlyPlaintext(let bytes):
                earlyPlaintext += bytes
            case .handshakeCompleted:
                if isClient {
                    clientHandshakeCompleted(now: now)
                } else if !earlyPlaintext.isEmpty {
                    // The client's 0-RTT bytes, accepted once by the anti-replay store: delivered now, flagged.
                    try? qmux.receive(earlyPlaintext, now: now)
                    earlyPlaintext = []
                    drainQMuxEvents(early: true)
                }
            case .plaintext(let bytes):
                do {
                    try qmux.receive(bytes, now: now)
                } catch {
                    break  // the QMux connection closed itself; `.closed` follows in its events
                }
            case .sessionTicket(let ticket):
                emit(.sessionTicket(ticket))
            case .closeNotify:
                qmux.transportClosed(now: now)
            }
        }
        drainQMuxEvents()
    }

    /// Client: TLS completed. If the server refused the early data, a fresh QMux session replaces the one that
    /// sent it (the server saw none of it); the early bytes are re-sent once the server's parameters arrive.
    private func clientHandshakeCompleted(now: UInt64) {
        guard earlyDataAccepted == false else { return }
        qmux = QMuxConnection(
            role: .client, localParameters: localParameters, now: now,
            keepAliveInterval: keepAliveInterval)
        resendAfterRejection = true
        emit(.earlyDataRejected)
    }

    private func resendEarlyStream() {
        resendAfterRejection = false
        guard let id = earlyStreamID else { return }
        // The fresh session's first stream gets the same ID, so the application's stream handle stays valid.
        guard (try? qmux.openBidirectionalStream()) == id else { return }
        try? qmux.write(stream: id, earlyStreamBytes, fin: false)
    }

    private func drainQMuxEvents(early: Bool = false) {
        while let event = qmux.nextEvent() {
            switch event {
            case .peerParameters:
                if resendAfterRejection { resendEarlyStream() }
                isReady = true
                emit(.handshakeCompleted)
            case .streamOpened(let id):
                emit(.streamOpened(id))
            case .streamData(let id, let bytes, let fin):
                emit(.streamData(id, bytes, fin: fin, isEarly: early))
            case .streamReset(let id, let code):
                emit(.streamReset(id, code: code))
            case .stopSending(let id, let code):
                emit(.stopSending(id, code: code))
            case .streamClosed(let id):
                emit(.streamClosed(id))
            case .datagram(let bytes):
                datagramsReceived += 1
                emit(.datagram(bytes, isEarly: early))
            case .pong:
                break
            case .closed(let reason):
                end(Self.closeReason(reason))
            }
        }
        if isReady && closeReason == nil { emit(.streamsAvailable) }
    }

    static func closeReason(_ reason: QMuxCloseReason) -> CloseReason {
        switch reason {
        case .localApplication(let code, let text): return .local(code: code, reason: text)
        case .peerApplication(let code, let text): return .peer(code: code, reason: text)
        case .idleTimeout: return .idleTimeout
        case .localError(let error):
            return .failed(
                TransportError(
                    .protocolViolation, "the peer broke QMux: \(error.message)",
                    transportErrorCode: (error.transportCode ?? .internalError).rawValue))
        case .peerError(let code, _, let text):
            return .failed(
                TransportError(
                    .closedByPeer,
                    "the peer closed the QMux connection with \(code)"
                        + (text.isEmpty ? "" : ": \(text)"), transportErrorCode: code.rawValue))
        case .transportClosed(let midRecord):
            return .failed(
                TransportError(
                    .connectionReset,
                    "the TCP connection ended without a CONNECTION_CLOSE"
                        + (midRecord ? " (in the middle of a record)" : "")))
        }
    }

    private func emit(_ event: QUICEvent) { events.append(event) }

    private func end(_ reason: CloseReason) {
        guard closeReason == nil else { return }
        closeReason = reason
        emit(.closed(reason))
    }

    /// The next event, in order, or nil.
    package func nextEvent() -> QUICEvent? { events.popFirst() }

    // MARK: - Output

    /// Ciphertext to write to TCP now: QMux records (once TLS allows), with at most `streamBudget` bytes of stream
    /// data (the rest stays queued), and TLS handshake bytes. After the connection closed this still returns the
    /// CONNECTION_CLOSE record and close_notify, once.
    package func takeCiphertext(now: UInt64, streamBudget: Int = .max) -> [UInt8] {
        if !tls.isHandshakeComplete && closeReason == nil { advance(now: now) }  // the client starts here
        if tls.isHandshakeComplete {
            let records = qmux.takeOutput(now: now, streamBudget: streamBudget)
            if !records.isEmpty {
                do {
                    try tls.send(records)
                } catch {
                    end(.failed(error))
                }
            }
            if closeReason != nil && !closeNotifySent {
                closeNotifySent = true
                tls.close()
            }
        }
        let bytes = tls.takeCiphertext()
        bytesSent += UInt64(bytes.count)
        return bytes
    }

    // MARK: - Time

    /// When `handleTimeout` must run next: the handshake deadline until ready, then QMux's idle/keep-alive timer.
    package var nextTimeout: UInt64? {
        guard closeReason == nil else { return nil }
        return isReady ? qmux.nextTimeout : handshakeDeadline
    }

    package func handleTimeout(now: UInt64) {
        guard closeReason == nil else { return }
        if !isReady {
            if now >= handshakeDeadline {
                end(
                    .failed(
                        TransportError(
                            .handshakeTimeout,
                            "the TLS/QMux handshake over TCP did not complete in time; the server may be unreachable")))
            }
            return
        }
        qmux.handleTimeout(now: now)
        drainQMuxEvents()
    }

    // MARK: - Application operations

    /// Opens a bidirectional stream; nil while the peer's parameters have not arrived or its stream limit is
    /// reached (retry on `.streamsAvailable`).
    package func openBidirectionalStream() throws(TransportError) -> Int64? { try openStream(bidirectional: true) }

    /// Opens a unidirectional stream (for a `RelayNotice`); nil while not ready or when the peer allows none.
    package func openUnidirectionalStream() throws(TransportError) -> Int64? { try openStream(bidirectional: false) }

    private func openStream(bidirectional: Bool) throws(TransportError) -> Int64? {
        if let closeReason { throw closeReason.error }
        guard isReady else { return nil }
        do {
            return try qmux.openStream(bidirectional: bidirectional)
        } catch {
            if error.usage == .streamLimitReached { return nil }
            throw Self.usageError(error)
        }
    }

    package func write(stream: Int64, _ bytes: [UInt8], fin: Bool) throws(TransportError) {
        if let closeReason { throw closeReason.error }
        do {
            try qmux.write(stream: stream, bytes, fin: fin)
        } catch {
            throw Self.usageError(error)
        }
    }

    /// Bytes written to a stream and not yet framed (waiting for flow-control credit).
    package func queuedBytes(stream: Int64) -> Int { qmux.queuedBytes(stream: stream) }

    /// Bytes written to all streams and not yet framed (waiting for flow-control credit).
    package var queuedStreamBytes: Int { qmux.queuedStreamBytes }

    package func consumed(stream: Int64, bytes: Int) { qmux.consumed(stream: stream, bytes: bytes) }
    package func resetStream(_ stream: Int64, code: UInt64) { qmux.resetStream(stream, code: code) }
    package func stopSending(_ stream: Int64, code: UInt64) { qmux.stopSending(stream, code: code) }

    /// The largest datagram payload the peer accepts (0 until ready, or when not negotiated).
    package var maxDatagramPayloadSize: Int { isReady ? qmux.maxDatagramPayload : 0 }

    /// Counts a datagram the client could not send (see `datagramsRejected`).
    package func noteDatagramRejected() { datagramsRejected += 1 }

    package func sendDatagram(_ payload: [UInt8]) throws(TransportError) {
        if let closeReason { throw closeReason.error }
        do {
            try qmux.sendDatagram(payload)
            datagramsSent += 1
        } catch {
            throw Self.usageError(error)
        }
    }

    /// Closes with an application code: CONNECTION_CLOSE then close_notify on the next `takeCiphertext`.
    package func close(code: UInt64, reason: String, now: UInt64) {
        guard closeReason == nil else { return }
        if tls.isHandshakeComplete {
            qmux.close(applicationError: code, reason: reason)
            drainQMuxEvents()
        }
        end(.local(code: code, reason: reason))
    }

    /// Whether TLS resumed from the ticket (valid once ready).
    package var isResumed: Bool { tls.isHandshakeComplete && tls.isResumed }

    /// Server: whether it accepted the client's early data (valid once ready).
    package var acceptedEarlyData: Bool { !isClient && tls.acceptedEarlyData }

    static func usageError(_ error: QMuxError) -> TransportError {
        switch error.usage {
        case .datagramEmpty?: return TransportError(.datagramEmpty, error.message)
        case .datagramTooLarge?: return TransportError(.datagramTooLarge, error.message)
        case .datagramsNotNegotiated?: return TransportError(.datagramsUnsupported, error.message)
        case .connectionClosed?: return TransportError(.connectionClosed, error.message)
        case .unknownStream?, .streamNotWritable?, .streamNotReadable?:
            return TransportError(.streamClosed, error.message)
        default: return TransportError(.protocolViolation, error.message)
        }
    }
}
