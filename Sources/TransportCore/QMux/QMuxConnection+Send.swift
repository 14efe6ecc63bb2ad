/// Output: turns queued control frames, datagrams and stream data into records (rules in QMuxConnection.swift).
extension QMuxConnection {
    /// The bytes to write to the transport (whole records), empty when nothing is pending. Stream data is framed
    /// here, as credit allows and at most `streamBudget` bytes of it (the rest stays queued, in
    /// `queuedStreamBytes`), so data written since the last call goes out in one batch. `now`, when given, advances
    /// the clock first (the idle timer restarts at the time frames are sent).
    package func takeOutput(now: UInt64? = nil, streamBudget: Int = .max) -> [UInt8] {
        if let now { advanceClock(now) }
        if !isClosed { buildOutput(streamBudget: streamBudget) }
        defer { output = [] }
        return output
    }

    /// True when `takeOutput` would return bytes (cheap check for the I/O layer's write interest).
    var hasPendingOutput: Bool {
        if !output.isEmpty { return true }
        guard !isClosed else { return false }
        if !pendingFrames.isEmpty || maxDataUpdatePending || !maxStreamDataUpdates.isEmpty
            || maxStreamsUpdatePending.bidi || maxStreamsUpdatePending.uni || pendingPing != nil
            || pendingPingResponse != nil
        {
            return true
        }
        guard sendingParameters != nil else { return false }
        if !pendingDatagrams.isEmpty { return true }
        return sendQueue.contains { id in
            guard let send = streams[id]?.send, send.hasPending else { return false }
            return (send.queuedCount == 0 && send.finQueued) || (send.offset < send.maxData && sentData < sendMaxData)
        }
    }

    /// Frames everything that may be sent now into `output`, stream data up to `streamBudget` bytes.
    func buildOutput(streamBudget: Int = .max) {
        let peerRecordSize = Int(
            min(
                sendingParameters?.maxRecordSize ?? QMuxTransportParameters.defaultMaxRecordSize,
                UInt64(Int32.max)))
        var packer = QMuxRecordPacker(target: min(peerRecordSize, Self.preferredRecordSize))

        if let sequence = pendingPingResponse {
            packer.add(.pingResponse(sequence: sequence))
            pendingPingResponse = nil
        }
        if let sequence = pendingPing {
            packer.add(.ping(sequence: sequence))
            pendingPing = nil
        }
        for frame in pendingFrames { packer.add(frame) }
        pendingFrames = []
        if maxDataUpdatePending {
            packer.add(.maxData(receiveMaxData))
            maxDataUpdatePending = false
        }
        for id in maxStreamDataUpdates {
            if let receive = streams[id]?.receive, !receive.isFinished, !receive.stopSendingSent {
                packer.add(.maxStreamData(streamID: id, maximum: receive.maxData))
            }
        }
        maxStreamDataUpdates = []
        if maxStreamsUpdatePending.bidi { packer.add(.maxStreams(bidirectional: true, maximum: peerLimit.bidi)) }
        if maxStreamsUpdatePending.uni { packer.add(.maxStreams(bidirectional: false, maximum: peerLimit.uni)) }
        maxStreamsUpdatePending = (false, false)

        if sendingParameters != nil {
            for datagram in pendingDatagrams { packer.add(.datagram(datagram)) }
            pendingDatagrams = []
            frameStreamData(into: &packer, budget: streamBudget)
        }

        let written = packer.framesWritten
        output.append(contentsOf: packer.finish())
        if written > 0 { lastActivity = now }
    }

    /// Round-robin over streams with pending data: each turn frames up to the rest of the current record from
    /// one stream, within the stream's and the connection's credit, and at most `budget` bytes in all (the next
    /// call then starts with the stream after the last one served, so a budget starves none). Blocked streams stay
    /// queued, and report STREAM_DATA_BLOCKED / DATA_BLOCKED once per limit.
    func frameStreamData(into packer: inout QMuxRecordPacker, budget: Int = .max) {
        var budget = max(budget, 0)
        var progress = true
        while progress && budget > 0 {
            progress = false
            var stillPending: [UInt64] = []
            for (index, id) in sendQueue.enumerated() {
                guard var send = streams[id]?.send, send.hasPending else {
                    sendQueued.remove(id)
                    continue
                }
                let streamCredit = send.maxData - send.offset
                let connectionCredit = sendMaxData - sentData
                var room =
                    packer.room
                    - QMuxFrame.streamHeaderLength(
                        streamID: id, offset: send.offset,
                        dataLength: packer.target)
                if room < 64 && !packer.isCurrentEmpty {
                    packer.flush()
                    room =
                        packer.room
                        - QMuxFrame.streamHeaderLength(
                            streamID: id, offset: send.offset,
                            dataLength: packer.target)
                }
                let count = Int(
                    min(
                        UInt64(send.queuedCount), streamCredit, connectionCredit, UInt64(max(room, 0)),
                        UInt64(budget)))
                let finNow = send.finQueued && count == send.queuedCount
                if count == 0 && !finNow {
                    if streamCredit == 0 && send.blockedReportedAt != send.maxData {
                        send.blockedReportedAt = send.maxData
                        packer.add(.streamDataBlocked(streamID: id, limit: send.maxData))
                    }
                    if connectionCredit == 0 && dataBlockedReportedAt != sendMaxData {
                        dataBlockedReportedAt = sendMaxData
                        packer.add(.dataBlocked(limit: sendMaxData))
                    }
                    streams[id]?.send = send
                    stillPending.append(id)
                    continue
                }
                let data = send.dequeue(count)
                packer.add(.stream(streamID: id, offset: send.offset, data: data, fin: finNow))
                send.offset += UInt64(count)
                sentData += UInt64(count)
                budget -= count
                if finNow { send.finSent = true }
                streams[id]?.send = send
                progress = true
                if send.hasPending {
                    stillPending.append(id)
                } else {
                    sendQueued.remove(id)
                    forgetIfClosed(id)
                }
                if budget == 0 {  // the streams not visited yet go first next time
                    sendQueue = Array(sendQueue[(index + 1)...]) + stillPending
                    return
                }
            }
            sendQueue = stillPending
        }
    }
}
