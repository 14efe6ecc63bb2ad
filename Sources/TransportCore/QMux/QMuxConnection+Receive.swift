/// Frame processing: what each received frame does to the connection (rules in QMuxConnection.swift).
extension QMuxConnection {
    func process(record: ArraySlice<UInt8>) throws(QMuxError) {
        var frameReader = QMuxFrameReader(record)
        // §4.2: the first frame must be QX_TRANSPORT_PARAMETERS; judged on its type alone, before its body
        // (so garbage or a prohibited frame first is TRANSPORT_PARAMETER_ERROR too).
        if peerParameters == nil, let (type, _) = VarInt.decode(record, at: record.startIndex),
            type != QMuxFrameType.qxTransportParameters
        {
            throw QMuxError(
                .transportParameterError, frameType: type,
                "the first frame received is type 0x\(String(type, radix: 16)), not QX_TRANSPORT_PARAMETERS (§4.2)")
        }
        while !frameReader.isAtEnd && !isClosed {
            let start = frameReader.index
            let frame = try QMuxFrame.parse(&frameReader)
            lastActivity = now
            lastReceive = now
            try handle(frame, type: frameReader.frameType, wireLength: frameReader.index - start)
        }
    }

    func handle(_ frame: QMuxFrame, type: UInt64, wireLength: Int) throws(QMuxError) {
        guard peerParameters != nil else {
            guard case .transportParameters(let parameters) = frame else {
                throw QMuxError(
                    .transportParameterError, frameType: type,
                    "the first frame received is type 0x\(String(type, radix: 16)), not QX_TRANSPORT_PARAMETERS (§4.2)")
            }
            try acceptPeerParameters(parameters)
            return
        }
        switch frame {
        case .transportParameters:
            throw QMuxError(
                .transportParameterError, frameType: type,
                "QX_TRANSPORT_PARAMETERS received again; it may only be the first frame (§4.2)")
        case .padding:
            break
        case .ping(let sequence):
            pendingPingResponse = max(pendingPingResponse ?? 0, sequence)
        case .pingResponse(let sequence):
            if let ping = keepAlivePing, sequence >= ping.sequence { keepAlivePing = nil }
            if let first = applicationPings.first, sequence >= first {
                applicationPings.removeAll { $0 <= sequence }
                emit(.pong(sequence: sequence))
            }
        case .stream(let id, let offset, let data, let fin):
            try receiveStream(id, offset: offset, data: data, fin: fin, type: type)
        case .resetStream(let id, let code, let finalSize):
            try receiveReset(id, code: code, finalSize: finalSize, type: type)
        case .stopSending(let id, let code):
            guard try resolveStream(id, receiving: false, type: type), let send = streams[id]?.send,
                !send.isFinished
            else { return }
            emit(.stopSending(Int64(id), code: code))
            resetSending(id, code: code)
        case .maxData(let maximum):
            if maximum > sendMaxData { sendMaxData = maximum }
        case .maxStreamData(let id, let maximum):
            guard try resolveStream(id, receiving: false, type: type), var send = streams[id]?.send else { return }
            if maximum > send.maxData {
                send.maxData = maximum
                streams[id]?.send = send
            }
        case .maxStreams(let bidirectional, let maximum):
            if bidirectional {
                localLimit.bidi = max(localLimit.bidi, maximum)
            } else {
                localLimit.uni = max(localLimit.uni, maximum)
            }
        case .dataBlocked:
            break  // informational: our credit follows consumption
        case .streamDataBlocked(let id, _):
            _ = try resolveStream(id, receiving: true, type: type)
        case .streamsBlocked:
            break
        case .connectionClose(let code, let frameType, let reason):
            if let frameType {
                finish(.peerError(code: QMuxTransportErrorCode(rawValue: code), frameType: frameType, reason: reason))
            } else {
                finish(.peerApplication(code: code, reason: reason))
            }
        case .datagram(let data):
            let limit = localParameters.maxDatagramFrameSize
            guard limit > 0 else {
                throw QMuxError(
                    .protocolViolation, frameType: type,
                    "DATAGRAM received but we did not advertise max_datagram_frame_size (RFC 9221 §3)")
            }
            guard UInt64(wireLength) <= limit else {
                throw QMuxError(
                    .protocolViolation, frameType: type,
                    "\(wireLength)-byte DATAGRAM frame exceeds our max_datagram_frame_size \(limit) (RFC 9221 §3)")
            }
            emit(.datagram(data))
        }
    }

    func acceptPeerParameters(_ parameters: QMuxTransportParameters) throws(QMuxError) {
        if let remembered = rememberedPeerParameters {
            if let reduced = parameters.reducedLimit(comparedTo: remembered) {
                throw QMuxError(
                    .protocolViolation, frameType: QMuxFrameType.qxTransportParameters,
                    "the server reduced \(reduced) below the value remembered for 0-RTT (QUIC §7.4.1)")
            }
            for (id, state) in streams {
                guard var send = state.send else { continue }
                let initial =
                    QMuxStreamID.isBidirectional(id)
                    ? (isLocallyInitiated(id)
                        ? parameters.initialMaxStreamDataBidiRemote
                        : parameters.initialMaxStreamDataBidiLocal)
                    : parameters.initialMaxStreamDataUni
                send.maxData = max(send.maxData, initial)
                streams[id]?.send = send
            }
        }
        peerParameters = parameters
        sendMaxData = max(sendMaxData, parameters.initialMaxData)
        localLimit = (
            max(localLimit.bidi, parameters.initialMaxStreamsBidi),
            max(localLimit.uni, parameters.initialMaxStreamsUni)
        )
        emit(.peerParameters(parameters))
    }

    func isLocallyInitiated(_ id: UInt64) -> Bool {
        QMuxStreamID.isClientInitiated(id) == (role == .client)
    }

    /// Validates a stream ID carried by a received frame and opens peer-initiated streams it implies.
    /// `receiving`: the frame concerns the peer's sending (STREAM, RESET_STREAM, STREAM_DATA_BLOCKED); else our
    /// sending (STOP_SENDING, MAX_STREAM_DATA). Returns false when the stream is closed and forgotten.
    func resolveStream(_ id: UInt64, receiving: Bool, type: UInt64) throws(QMuxError) -> Bool {
        let local = isLocallyInitiated(id)
        let bidirectional = QMuxStreamID.isBidirectional(id)
        if !bidirectional && local == receiving {
            throw QMuxError(
                .streamStateError, frameType: type,
                receiving
                    ? "frame for the receiving part of our send-only stream \(id)"
                    : "frame for the sending part of the peer's receive-only stream \(id)")
        }
        let index = QMuxStreamID.index(id)
        if local {
            let opened = bidirectional ? localOpened.bidi : localOpened.uni
            guard index < opened else {
                throw QMuxError(.streamStateError, frameType: type, "frame for stream \(id), which we have not opened")
            }
            return streams[id] != nil
        }
        let opened = bidirectional ? peerOpened.bidi : peerOpened.uni
        if index >= opened {
            let limit = bidirectional ? peerLimit.bidi : peerLimit.uni
            guard index < limit else {
                throw QMuxError(
                    .streamLimitError, frameType: type,
                    "peer opened stream \(id) beyond our limit of \(limit) \(bidirectional ? "bidirectional" : "unidirectional") streams"
                )
            }
            openPeerStreams(upTo: index, bidirectional: bidirectional)
        }
        return streams[id] != nil
    }

    func openPeerStreams(upTo index: UInt64, bidirectional: Bool) {
        let first = bidirectional ? peerOpened.bidi : peerOpened.uni
        for next in first...index {
            let id = QMuxStreamID.make(index: next, clientInitiated: role == .server, bidirectional: bidirectional)
            var state = QMuxStreamState(id: id)
            if bidirectional {
                state.send = QMuxSendHalf(maxData: sendingParameters?.initialMaxStreamDataBidiLocal ?? 0)
                state.receive = QMuxReceiveHalf(window: localParameters.initialMaxStreamDataBidiRemote)
            } else {
                state.receive = QMuxReceiveHalf(window: localParameters.initialMaxStreamDataUni)
            }
            streams[id] = state
            emit(.streamOpened(Int64(id)))
        }
        if bidirectional { peerOpened.bidi = index + 1 } else { peerOpened.uni = index + 1 }
    }

    func receiveStream(_ id: UInt64, offset: UInt64, data: [UInt8], fin: Bool, type: UInt64) throws(QMuxError) {
        guard try resolveStream(id, receiving: true, type: type), var receive = streams[id]?.receive else { return }
        let end = offset + UInt64(data.count)
        if let finalSize = receive.finalSize, end > finalSize || (fin && end != finalSize) {
            throw QMuxError(
                .finalSizeError, frameType: type,
                "STREAM on stream \(id) ends at \(end)\(fin ? " with FIN" : ""), final size is \(finalSize)")
        }
        if receive.resetReceived { return }  // the peer reset it; its data no longer matters
        guard offset == receive.offset else {
            throw QMuxError(
                .protocolViolation, frameType: type,
                "STREAM on stream \(id) at offset \(offset), expected \(receive.offset): QMux stream data must arrive in order (§4.1)"
            )
        }
        guard end <= receive.maxData else {
            throw QMuxError(
                .flowControlError, frameType: type,
                "stream \(id) data reaches \(end), beyond its limit \(receive.maxData)")
        }
        let added = end - receive.offset
        guard added <= receiveMaxData - receivedData else {
            throw QMuxError(
                .flowControlError, frameType: type,
                "connection data reaches \(receivedData + added), beyond MAX_DATA \(receiveMaxData)")
        }
        receivedData += added
        receive.offset = end
        if fin { receive.finalSize = end }
        if receive.stopSendingSent {
            receive.consumed = receive.offset
            consumeConnectionCredit(added)
        } else if !data.isEmpty || fin {
            if !data.isEmpty { applicationHeld[id, default: 0] += UInt64(data.count) }
            emitStreamData(Int64(id), data, fin: fin)
        }
        streams[id]?.receive = receive
        forgetIfClosed(id)
    }

    func receiveReset(_ id: UInt64, code: UInt64, finalSize: UInt64, type: UInt64) throws(QMuxError) {
        guard try resolveStream(id, receiving: true, type: type), var receive = streams[id]?.receive else { return }
        if let known = receive.finalSize, known != finalSize {
            throw QMuxError(
                .finalSizeError, frameType: type,
                "RESET_STREAM on stream \(id) with final size \(finalSize), already \(known)")
        }
        guard finalSize >= receive.offset else {
            throw QMuxError(
                .finalSizeError, frameType: type,
                "RESET_STREAM on stream \(id) with final size \(finalSize) below the \(receive.offset) bytes received")
        }
        guard finalSize <= receive.maxData else {
            throw QMuxError(
                .flowControlError, frameType: type,
                "RESET_STREAM final size \(finalSize) exceeds stream \(id)'s limit \(receive.maxData)")
        }
        if receive.resetReceived || receive.isFinished { return }
        let added = finalSize - receive.offset
        guard added <= receiveMaxData - receivedData else {
            throw QMuxError(
                .flowControlError, frameType: type,
                "RESET_STREAM final size takes connection data beyond MAX_DATA \(receiveMaxData)")
        }
        receivedData += added
        // Bytes that will never be delivered, and those delivered but not consumed (QUIC §3.2: the receiver may
        // discard them), return their connection credit at once.
        consumeConnectionCredit(added)
        receive.offset = finalSize
        receive.finalSize = finalSize
        receive.resetReceived = true
        streams[id]?.receive = receive
        releaseHeld(id)
        if !receive.stopSendingSent { emit(.streamReset(Int64(id), code: code)) }
        forgetIfClosed(id)
    }

    /// Reports stream data, joined to the event at the back of the queue when that is data of the same stream:
    /// contiguous frames of one stream (a peer may send one byte per frame) become one event, not one
    /// allocation per frame all the way to the application.
    func emitStreamData(_ id: Int64, _ data: [UInt8], fin: Bool) {
        let joined = events.withLast { last -> Bool in
            guard case .streamData(id, var bytes, fin: false) = last else { return false }
            last = .streamData(id, [], fin: false)  // the queue lets go of the bytes: they grow in place
            bytes += data
            last = .streamData(id, bytes, fin: fin)
            return true
        }
        if joined != true { emit(.streamData(id, data, fin: fin)) }
    }

    /// Forgets a stream whose both parts are finished (reported as `.streamClosed`); a peer-initiated one
    /// returns stream credit.
    func forgetIfClosed(_ id: UInt64) {
        guard let state = streams[id], state.isClosed else { return }
        streams[id] = nil
        emit(.streamClosed(Int64(id)))
        guard !isLocallyInitiated(id) else { return }
        // Every closed peer stream is credited at once (MAX_STREAMS = closed + initial, one frame per flush): a peer
        // at its limit waits for nothing but the close, as over QUIC.
        let bidirectional = QMuxStreamID.isBidirectional(id)
        let initial = bidirectional ? localParameters.initialMaxStreamsBidi : localParameters.initialMaxStreamsUni
        guard initial > 0 else { return }
        if bidirectional {
            peerClosed.bidi += 1
            peerLimit.bidi = min(peerClosed.bidi + initial, QMuxFrameType.maxStreamsLimit)
            maxStreamsUpdatePending.bidi = true
        } else {
            peerClosed.uni += 1
            peerLimit.uni = min(peerClosed.uni + initial, QMuxFrameType.maxStreamsLimit)
            maxStreamsUpdatePending.uni = true
        }
    }

    func openStream(bidirectional: Bool) throws(QMuxError) -> Int64 {
        try ensureOpen()
        guard let peer = sendingParameters else {
            throw QMuxError(usage: .streamLimitReached, "the peer's transport parameters have not arrived yet")
        }
        let opened = bidirectional ? localOpened.bidi : localOpened.uni
        let limit = bidirectional ? localLimit.bidi : localLimit.uni
        guard opened < limit else {
            if bidirectional, streamsBlockedReported.bidi != limit {
                streamsBlockedReported.bidi = limit
                pendingFrames.append(.streamsBlocked(bidirectional: true, limit: limit))
            } else if !bidirectional, streamsBlockedReported.uni != limit {
                streamsBlockedReported.uni = limit
                pendingFrames.append(.streamsBlocked(bidirectional: false, limit: limit))
            }
            throw QMuxError(
                usage: .streamLimitReached,
                "the peer allows \(limit) \(bidirectional ? "bidirectional" : "unidirectional") streams, all opened")
        }
        let id = QMuxStreamID.make(index: opened, clientInitiated: role == .client, bidirectional: bidirectional)
        var state = QMuxStreamState(id: id)
        if bidirectional {
            state.send = QMuxSendHalf(maxData: peer.initialMaxStreamDataBidiRemote)
            state.receive = QMuxReceiveHalf(window: localParameters.initialMaxStreamDataBidiLocal)
            localOpened.bidi += 1
        } else {
            state.send = QMuxSendHalf(maxData: peer.initialMaxStreamDataUni)
            localOpened.uni += 1
        }
        streams[id] = state
        return Int64(id)
    }

    /// Queues RESET_STREAM for our sending part (final size = bytes emitted), dropping unsent data.
    func resetSending(_ id: UInt64, code: UInt64) {
        guard var send = streams[id]?.send, !send.isFinished else { return }
        send.discardQueue()
        send.resetSent = true
        streams[id]?.send = send
        pendingFrames.append(.resetStream(streamID: id, errorCode: code, finalSize: send.offset))
        forgetIfClosed(id)
    }

    func markSendPending(_ id: UInt64) {
        if sendQueued.insert(id).inserted { sendQueue.append(id) }
    }
}
