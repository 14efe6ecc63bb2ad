internal import CNgtcp2
internal import CTransportShims

extension QUICConnection {
    /// Writes the next packet into `buffer` (at least `maxUDPPayloadSize` bytes) and returns its length and ECN
    /// codepoint; length 0 when there is nothing to send now (congestion, pacing, or nothing pending).
    ///
    /// Order inside a packet: fresh DATAGRAM frames first (audio is latency-bound), then stream data in
    /// round-robin, coalesced with `*_FLAG_MORE` so a packet carries both and neither starves the other.
    package func writePacket(into buffer: UnsafeMutableRawBufferPointer, now: UInt64) -> (length: Int, ecn: UInt32) {
        // Once closed, only the CONNECTION_CLOSE goes out (see `takeClosePacket`).
        guard !isClosed, closingPacket == nil, let conn else { return (0, 0) }
        let dest = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let capacity = buffer.count
        var ecn: UInt32 = 0
        var datagramAllowed = true
        var attemptedStreams = 0

        while true {
            // Taken out at once (one lock per copy, not two): put back when ngtcp2 did not take it.
            if datagramAllowed, let (entry, queuedBehind) = datagrams.popFresh(now: now) {
                var accepted: Int32 = 0
                // "More" only when something could share the packet: a lone frame (a relay's copy) is written and
                // sealed in one call instead of two.
                let more = queuedBehind || hasStreamWork
                let n = entry.payload.withUnsafeBufferPointer { payload -> ngtcp2_ssize in
                    var vec = ngtcp2_vec(base: UnsafeMutablePointer(mutating: payload.baseAddress), len: payload.count)
                    return ptt_conn_writev_datagram(
                        conn, frameGuard.state, &path.pointee.path, &ecn, dest, capacity, &accepted,
                        more ? UInt32(NGTCP2_WRITE_DATAGRAM_FLAG_MORE) : 0, entry.id, &vec, 1, now)
                }
                if n == NGTCP2_ERR_INVALID_STATE || n == NGTCP2_ERR_INVALID_ARGUMENT {
                    // The peer does not accept it (no support, or larger than its limit): drop, count, go on.
                    counters.datagramsRejected += 1
                    continue
                }
                if accepted != 0 {
                    counters.datagramsSent += 1
                } else {
                    datagrams.restoreFirst(entry)
                }
                if n == NGTCP2_ERR_WRITE_MORE { continue }
                if n < 0 { return fatalWrite(Int32(n), now: now) }
                if n > 0 { return sent(Int(n), ecn: ecn, now: now) }
                datagramAllowed = false  // no room now (congestion / amplification): try streams, then stop
                if accepted == 0 && !datagrams.isEmpty && !hasStreamWork { return (0, 0) }
            }

            let streamID = nextWritableStream()
            var datalen: ngtcp2_ssize = -1
            var fin = false
            var flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_NONE)
            var vectors: [ngtcp2_vec] = []
            if let streamID, let buffer = sendBuffers[streamID] {
                vectors = buffer.pendingVectors()
                fin = buffer.finQueued && buffer.vectorsReachEnd()
                flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_MORE) | (fin ? UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) : 0)
            }
            let n = vectors.withUnsafeBufferPointer { vecs in
                ptt_conn_writev_stream(
                    conn, frameGuard.state, &path.pointee.path, &ecn, dest, capacity, &datalen, flags,
                    streamID ?? -1, vecs.baseAddress, vecs.count, now)
            }
            if let streamID, datalen >= 0 {
                sendBuffers[streamID]?.markSent(Int(datalen), fin: fin)
                rotateStream(streamID)
            }
            switch Int32(clamping: n) {
            case NGTCP2_ERR_WRITE_MORE:
                attemptedStreams += 1
                if attemptedStreams > 64 { datagramAllowed = false }
                continue
            case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                if let streamID {
                    blockedStreams.insert(streamID)
                    rotateStream(streamID)
                }
                continue
            case NGTCP2_ERR_STREAM_SHUT_WR, NGTCP2_ERR_STREAM_NOT_FOUND:
                if let streamID { dropSendState(streamID) }
                continue
            default:
                if n < 0 { return fatalWrite(Int32(n), now: now) }
                return n > 0 ? sent(Int(n), ecn: ecn, now: now) : (0, 0)
            }
        }
    }

    /// The peer address of the packet `writePacket` (or the CONNECTION_CLOSE) just wrote: ngtcp2 picks the path
    /// for each packet, so after a NAT rebinding (or while it validates a new path) this is the peer's new
    /// address, not the handshake's. A server must send each packet there.
    package var packetRemote: SocketAddress {
        let remote = path.pointee.path.remote
        guard let address = remote.addr, remote.addrlen > 0 else { return SocketAddress() }
        return SocketAddress(copying: address, length: remote.addrlen)
    }

    /// The peer address of the connection's current path: the one ngtcp2 settled on (while it validates a new
    /// path, packets may go to both; this moves once the new path is in use).
    package var currentRemote: SocketAddress {
        guard let conn, let current = ngtcp2_conn_get_path(conn), let address = current.pointee.remote.addr,
            current.pointee.remote.addrlen > 0
        else { return SocketAddress() }
        return SocketAddress(copying: address, length: current.pointee.remote.addrlen)
    }

    /// Call after a burst of `writePacket` calls: schedules pacing for the next burst.
    ///
    /// Two departures from calling `ngtcp2_conn_update_pkt_tx_time` after every burst, both about latency:
    /// - ngtcp2 0.12.1 paces with the 333 ms default RTT until the first RTT sample, which delays the handshake's
    ///   last flight and 0-RTT data by tens of milliseconds: no pacing before an RTT was measured. (1.x paces with
    ///   1 ms until then: it is left to pace.)
    /// - While the connection is application-limited (less than half the congestion window in flight) a burst
    ///   does not delay the next one (0.12.1 only: 1.x asserts that timestamps never go back, so there ngtcp2 paces
    ///   every burst as it computes, from 1 ms per cwnd before the first sample): pacing exists to spread a window's worth of data, and a push-to-talk
    ///   control exchange or audio frame should not wait behind the session ticket that preceded it. Such bursts
    ///   stay below half a congestion window, within RFC 9002 §7.7's burst limit. Bulk transfers that fill the
    ///   window are paced as ngtcp2 computes.
    ///
    /// `bytesSinceBurst` mirrors ngtcp2's own pacing byte count, which only `ngtcp2_conn_update_pkt_tx_time` resets:
    /// the bytes written before the first RTT sample (the handshake flights, on 0.12.1) stay in both counts until the
    /// first update, so the "send now" time computed here (`ptt_conn_pacing_wait`, the linked generation's formula)
    /// matches the interval ngtcp2 adds.
    ///
    /// After an application-limited burst on 0.12.1 the pacing deadline this sets is "now", and
    /// `ngtcp2_conn_get_expiry` reports it: a driver would see a timer already due after every burst and run the
    /// connection a second time only to have `ngtcp2_conn_handle_expiry` clear it. So when that deadline is the
    /// only one due, the expiry is handled here at once: with nothing else due it only clears the pacing deadline,
    /// nothing is left to write, and `nextTimeout` is the connection's next real timer. (On 1.x the deadline is
    /// the pacing interval ahead, which 1.11 does not clear before it passes: its timer still fires.)
    package func finishWriteBurst(now: UInt64) {
        guard !isClosed, let conn else { return }
        var stats = ptt_conn_stats()
        ptt_conn_get_stats(conn, &stats)
        guard stats.rtt_sampled != 0 || !LinkedNgtcp2.has(.pacesWithInitialRTT) else { return }
        defer { bytesSinceBurst = 0 }
        guard stats.bytes_in_flight * 2 < stats.cwnd else { return ngtcp2_conn_update_pkt_tx_time(conn, now) }
        // Every timer but the pacing deadline about to be set (a stale pacing deadline counts as due: then the
        // driver's own pass handles it, as before).
        let otherTimers = ngtcp2_conn_get_expiry(conn)
        let interval = ptt_conn_pacing_wait(conn, UInt64(bytesSinceBurst))
        ngtcp2_conn_update_pkt_tx_time(conn, now > interval ? now - interval : 0)  // next send: now (0.12.1)
        // Only the pacing deadline is due: clear it now (a failure, which nothing due can cause, takes the full path).
        guard otherTimers > now, ngtcp2_conn_get_expiry(conn) <= now else { return }
        if ngtcp2_conn_handle_expiry(conn, now) != 0 { handleTimeout(now: now) }
    }

    /// The number of packets ngtcp2 wants sent in one burst (its send quantum in packets).
    package var burstPacketLimit: Int {
        guard let conn, !isClosed else { return 1 }
        let quantum = ngtcp2_conn_get_send_quantum(conn)
        return max(1, min(64, quantum / max(1, parameters.maxUDPPayloadSize)))
    }

    private var hasStreamWork: Bool { writableStreams.contains { !blockedStreams.contains($0) } }

    private func nextWritableStream() -> Int64? {
        writableStreams.first { !blockedStreams.contains($0) && sendBuffers[$0]?.hasPendingData == true }
    }

    /// Moves a stream to the back of the queue, or out of it when it has nothing left to send.
    private func rotateStream(_ id: Int64) {
        guard let index = writableStreams.firstIndex(of: id) else { return }
        writableStreams.remove(at: index)
        if sendBuffers[id]?.hasPendingData == true { writableStreams.append(id) }
    }

    func markWritable(_ id: Int64) {
        if !writableStreams.contains(id) { writableStreams.append(id) }
    }

    /// Ends a stream's sending side for the application. Its buffer is kept until ngtcp2 closes the stream: after a
    /// reset or a STOP_SENDING, ngtcp2 0.12.1 may still read bytes it sent before (a retransmission), and freeing
    /// them here was a use-after-free (AddressSanitizer, under the stateful fuzzer).
    func dropSendState(_ id: Int64) {
        if let buffer = sendBuffers.removeValue(forKey: id) { retiredSendBuffers[id] = buffer }
        blockedStreams.remove(id)
        writableStreams.removeAll { $0 == id }
    }

    /// ngtcp2 closed the stream (`stream_close`): it reads none of its bytes any more.
    func forgetStream(_ id: Int64) {
        dropSendState(id)
        retiredSendBuffers[id] = nil
    }

    private func sent(_ length: Int, ecn: UInt32, now: UInt64) -> (length: Int, ecn: UInt32) {
        if role == .server && frameGuard.takeSentPathChallenge() {
            pathRules.challengeSent(pto: ngtcp2_conn_get_pto(conn), now: now)
        }
        bytesSinceBurst += length
        counters.packetsSent += 1
        counters.bytesSent += UInt64(length)
        return (length, ecn)
    }

    private func fatalWrite(_ rv: Int32, now: UInt64) -> (length: Int, ecn: UInt32) {
        failWithClose(ngtcp2Failure(rv, "writing a packet"), liberr: rv, now: now)
        return (0, 0)
    }

    /// Writes a CONNECTION_CLOSE and keeps it for the closing period (see `takeClosePacket`).
    func writeClose(_ ccerr: inout ptt_ccerr, now: UInt64) {
        guard closingPacket == nil, let conn, ptt_conn_in_draining_period(conn) == 0 else { return }
        var packet = [UInt8](repeating: 0, count: parameters.maxUDPPayloadSize)
        let n = packet.withUnsafeMutableBufferPointer { buffer in
            ptt_conn_write_connection_close(conn, &path.pointee.path, buffer.baseAddress, buffer.count, &ccerr, now)
        }
        guard n > 0 else { return }
        packet.removeSubrange(Int(n)...)
        closingPacket = packet
        closeRemote = closingAnswers.firstDestination(path: packetRemote, proven: peerAddresses)
        pendingClosePacket = true
    }

    /// The CONNECTION_CLOSE to send now, once after closing and again when the peer keeps sending, and the address
    /// it goes to (a server's; a client sends on its connected socket). Never an address the peer has not proven
    /// beyond three times what came from it (see `ClosingAnswers`).
    package func takeClosePacket() -> (bytes: [UInt8], remote: SocketAddress)? {
        guard pendingClosePacket, let closingPacket else { return nil }
        pendingClosePacket = false
        counters.packetsSent += 1
        counters.bytesSent += UInt64(closingPacket.count)
        return (closingPacket, closeRemote)
    }

    /// How long the closing or draining period lasts (3 PTO, RFC 9000 §10.2).
    package var closingPeriod: UInt64 {
        guard let conn else { return 0 }
        return 3 * ngtcp2_conn_get_pto(conn)
    }

    /// A packet of `length` bytes from `sender` arrived during the closing period: answer with the
    /// CONNECTION_CLOSE again, to `sender`, when `ClosingAnswers` allows it (a validated address always; another
    /// once three times its own bytes cover the close). In the draining period nothing is sent.
    package func receivedWhileClosing(from sender: SocketAddress, length: Int) {
        guard let closingPacket else { return }
        let cap = 3 * parameters.maxUDPPayloadSize
        guard
            closingAnswers.answer(
                from: sender, length: length, cost: closingPacket.count, cap: cap, proven: peerAddresses)
        else { return }
        closeRemote = sender
        pendingClosePacket = true
    }
}
