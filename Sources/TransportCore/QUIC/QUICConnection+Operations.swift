internal import CNgtcp2
internal import CTransportShims

extension QUICConnection {
    /// Opens a bidirectional stream; nil when the peer's stream limit is reached (retry on `.streamsAvailable`).
    package func openBidirectionalStream() throws(TransportError) -> Int64? { try openStream(unidirectional: false) }

    /// Opens a unidirectional stream (for a `RelayNotice`); nil when the peer allows none (now).
    package func openUnidirectionalStream() throws(TransportError) -> Int64? { try openStream(unidirectional: true) }

    private func openStream(unidirectional: Bool) throws(TransportError) -> Int64? {
        try ensureOpen()
        var id: Int64 = -1
        let rv =
            unidirectional ? ngtcp2_conn_open_uni_stream(conn, &id, nil) : ngtcp2_conn_open_bidi_stream(conn, &id, nil)
        if rv == NGTCP2_ERR_STREAM_ID_BLOCKED { return nil }
        guard rv == 0 else { throw ngtcp2Failure(rv, "opening a stream") }
        sendBuffers[id] = StreamSendBuffer()
        return id
    }

    /// Queues bytes (and optionally FIN) on a stream. The bytes are copied once, into the buffer ngtcp2 reads
    /// until the peer acknowledges them.
    package func write<Bytes: Collection>(stream id: Int64, _ data: Bytes, fin: Bool) throws(TransportError)
    where Bytes.Element == UInt8 {
        try ensureOpen()
        guard var buffer = sendBuffers[id] else {
            throw TransportError(.streamClosed, "stream \(id) is closed for writing (finished, reset or unknown)")
        }
        guard !buffer.finQueued else {
            throw TransportError(.streamClosed, "stream \(id) was already finished; open a new stream to send more")
        }
        buffer.append(data)
        if fin { buffer.finish() }
        sendBuffers[id] = buffer
        markWritable(id)
    }

    /// Bytes written to the stream and not yet acknowledged.
    package func bufferedBytes(stream id: Int64) -> UInt64 { sendBuffers[id]?.bufferedBytes ?? 0 }

    /// Abruptly ends our sending side (RESET_STREAM) and asks the peer to stop (STOP_SENDING).
    package func resetStream(_ id: Int64, code: UInt64) {
        guard !isClosed else { return }
        _ = ptt_conn_shutdown_stream(conn, id, code)
        dropSendState(id)
        releaseHeld(id)
    }

    /// Asks the peer to stop sending on the stream (STOP_SENDING); our sending side stays open. The bytes passed to
    /// the application and not consumed yet return their connection credit (ngtcp2 returns that of the rest).
    package func stopSending(_ id: Int64, code: UInt64) {
        guard !isClosed else { return }
        _ = ptt_conn_shutdown_stream_read(conn, id, code)
        releaseHeld(id)
    }

    /// The application consumed `count` bytes of the stream: grant the peer that much more credit. Only bytes
    /// passed on and not yet consumed or released count (a released stream's credit is back already).
    package func extendCredit(stream id: Int64, by count: Int) {
        guard !isClosed, count > 0, let held = applicationHeld[id] else { return }
        let credit = min(UInt64(count), held)
        applicationHeld[id] = held > credit ? held - credit : nil
        _ = ngtcp2_conn_extend_max_stream_offset(conn, id, credit)
        ngtcp2_conn_extend_max_offset(conn, credit)
    }

    /// Returns the connection credit of a stream's bytes passed to the application and not consumed, and stops
    /// counting them. (A counter update in ngtcp2: safe inside its callbacks.)
    func releaseHeld(_ id: Int64) {
        guard !isClosed, let held = applicationHeld.removeValue(forKey: id) else { return }
        ngtcp2_conn_extend_max_offset(conn, held)
    }

    /// The largest datagram payload that fits in one packet on the current path and that the peer accepts;
    /// 0 when the peer did not negotiate DATAGRAM support (or the handshake has not told us yet).
    package var maxDatagramPayloadSize: Int {
        guard let conn, let remote = ngtcp2_conn_get_remote_transport_params(conn) else { return 0 }
        let peerLimit = Int(remote.pointee.max_datagram_frame_size)
        guard peerLimit > 0 else { return 0 }
        // Short header (1) + DCID (up to 20) + packet number (up to 4) + AEAD tag (16) + frame type and length (3).
        let pathLimit = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn) - 44
        return max(0, min(peerLimit - 3, pathLimit))
    }

    /// Queues a DATAGRAM frame, dropped if not sent by `deadline` (UInt64.max: no expiry). Never blocks.
    package func sendDatagram(_ payload: [UInt8], deadline: UInt64 = .max) throws(TransportError) {
        try ensureOpen()
        let limit = maxDatagramPayloadSize
        let supported = parameters.maxDatagramFrameSize > 0 && (isHandshakeCompleted == false || limit > 0)
        // Before the handshake the peer's limit is unknown (unless 0-RTT remembered it): cap at the path minimum.
        try DatagramQueue.checkPayload(payload, maximum: supported ? (limit > 0 ? limit : 1200 - 44) : 0)
        try datagrams.enqueue(payload, deadline: deadline)
    }

    /// A datagram accepted by the API could not be queued after all (the path shrank, or the peer's limit).
    package func noteDatagramRejected() { counters.datagramsRejected += 1 }

    /// Closes with an application error code and reason: queues CONNECTION_CLOSE and reports `.closed(.local)`.
    package func close(code: UInt64, reason: String, now: UInt64) {
        guard !isClosed, let conn else { return }
        var ccerr = ptt_ccerr()
        var reasonBytes = Array(reason.utf8.prefix(1024))
        reasonBytes.withUnsafeMutableBufferPointer { buffer in
            if ngtcp2_conn_get_handshake_completed(conn) != 0 {
                ptt_ccerr_set_application_error(&ccerr, code, buffer.baseAddress, buffer.count)
            } else {
                // Before the handshake, an application close must travel as APPLICATION_ERROR (RFC 9000 §10.2.3).
                ptt_ccerr_set_transport_error(&ccerr, 0x0c, buffer.baseAddress, buffer.count)
            }
            writeClose(&ccerr, now: now)
        }
        finish(.local(code: code, reason: reason))
    }

    /// RTT, congestion window and the packet/datagram counters.
    /// What a metrics scrape reads of a live connection: its counters, the datagrams that expired unsent and the
    /// negotiated version's codepoint (0 before it is known) — none of ngtcp2's recovery figures that `statistics`
    /// gathers, so a scrape over thousands of connections stays cheap on their loop.
    package var metricsSample: (counters: QUICCounters, datagramsExpired: UInt64, version: UInt32) {
        (counters, datagrams.expired, conn.map { ngtcp2_conn_get_negotiated_version($0) } ?? 0)
    }

    package var statistics: QUICStatistics {
        var result = QUICStatistics(counters: counters)
        result.datagramsExpired = datagrams.expired
        guard let conn else { return result }
        var stats = ptt_conn_stats()
        ptt_conn_get_stats(conn, &stats)
        result.latestRTT = stats.latest_rtt
        result.smoothedRTT = stats.smoothed_rtt
        result.minRTT = stats.min_rtt == UInt64.max ? 0 : stats.min_rtt
        result.rttSampled = stats.rtt_sampled != 0
        result.congestionWindow = stats.cwnd
        result.bytesInFlight = stats.bytes_in_flight
        result.ptoCount = stats.pto_count
        result.negotiatedVersion = ngtcp2_conn_get_negotiated_version(conn)
        return result
    }

    /// Client: the server's transport parameters, encoded for a later 0-RTT attempt (empty before the handshake).
    package var encodedPeerTransportParameters: [UInt8] {
        guard let conn, isHandshakeCompleted, ngtcp2_conn_get_remote_transport_params(conn) != nil else { return [] }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBufferPointer {
            ptt_conn_encode_0rtt_transport_params(conn, $0.baseAddress, $0.count)
        }
        return n > 0 ? Array(buffer.prefix(Int(n))) : []
    }

    /// Whether TLS resumed from a ticket (valid after the handshake).
    package var isResumed: Bool {
        guard let session else { return false }
        return QUICTLSSession.isResumed(session)
    }

    /// Server: whether it accepted the client's 0-RTT data (known once the ClientHello was processed).
    package var acceptedEarlyData: Bool {
        guard role == .server, let session else { return false }
        return QUICTLSSession.earlyDataAccepted(session)
    }

    /// Whether the peer speaks the negotiated ALPN (`nil` before the handshake).
    package var negotiatedALPN: String? {
        guard let session else { return nil }
        return QUICTLSSession.selectedALPN(session)
    }

    package func ensureOpen() throws(TransportError) {
        if isClosed, let closeReason { throw closeReason.error }
    }
}

/// A snapshot of a connection's counters and ngtcp2's RTT / congestion state (times in nanoseconds).
package struct QUICStatistics: Sendable {
    package var counters: QUICCounters
    package var latestRTT: UInt64 = 0
    package var smoothedRTT: UInt64 = 0
    package var minRTT: UInt64 = 0
    package var rttSampled = false
    package var congestionWindow: UInt64 = 0
    package var bytesInFlight: UInt64 = 0
    package var ptoCount: UInt64 = 0
    package var datagramsExpired: UInt64 = 0
    /// The QUIC version the connection speaks (`PTT_QUIC_V1` or `PTT_QUIC_V2`; 0 before it is known).
    package var negotiatedVersion: UInt32 = 0
}
