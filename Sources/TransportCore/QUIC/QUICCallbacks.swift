internal import CNgtcp2
internal import CTransportShims

/// ngtcp2's callback table. Every trampoline finds its `QUICConnection` through `user_data` and only records
/// an event or updates bookkeeping; none calls back into ngtcp2.
enum QUICCallbacks {
    /// The connection behind ngtcp2's `user_data`.
    /// Unretained: the connection owns the `ngtcp2_conn`, so it is alive during every callback.
    @inline(__always)
    static func owner(_ userData: UnsafeMutableRawPointer?) -> QUICConnection {
        Unmanaged<QUICConnection>.fromOpaque(userData!).takeUnretainedValue()
    }

    static func make(role: QUICConnection.Role) -> ngtcp2_callbacks {
        var cb = ngtcp2_callbacks()
        switch role {
        case .client:
            cb.client_initial = ngtcp2_crypto_client_initial_cb
            cb.recv_retry = ngtcp2_crypto_recv_retry_cb
        case .server:
            cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb
        }
        cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb
        cb.encrypt = ptt_guarded_encrypt_cb  // ngtcp2_crypto_encrypt_cb + the frame guard's record of PATH_CHALLENGEs
        cb.decrypt = ptt_guarded_decrypt_cb  // ngtcp2_crypto_decrypt_cb + the frame guard
        cb.hp_mask = ngtcp2_crypto_hp_mask_cb
        cb.update_key = ngtcp2_crypto_update_key_cb
        cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb
        cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb
        cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb
        cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb

        cb.rand = { dest, length, context in
            // The connection points `rand_ctx` at itself (see `QUICConnection.useRandomSource`).
            let random =
                context?.pointee.native_handle.map { QUICCallbacks.owner($0).parameters.random } ?? SystemRandom()
            random.fill(UnsafeMutableRawBufferPointer(start: dest, count: length))
        }
        cb.get_new_connection_id = { _, cid, token, length, userData in
            let connection = QUICCallbacks.owner(userData)
            let id =
                connection.connectionIDs?.makeID()
                ?? ConnectionID.random(length: length, using: connection.parameters.random)
            cid!.pointee = id.ngtcp2
            let resetToken: [UInt8]
            if let secret = connection.statelessResetSecret {
                resetToken = QUICConnection.statelessResetToken(secret: secret, cid: id)
            } else {
                resetToken = connection.parameters.random.bytes(Int(NGTCP2_STATELESS_RESET_TOKENLEN))
            }
            token!.update(from: resetToken, count: resetToken.count)
            connection.onConnectionIDChange?(id, true)
            return 0
        }
        cb.remove_connection_id = { _, cid, userData in
            QUICCallbacks.owner(userData).onConnectionIDChange?(ConnectionID(cid!.pointee), false)
            return 0
        }
        cb.handshake_completed = { _, userData in
            let connection = QUICCallbacks.owner(userData)
            connection.isHandshakeCompletedStorage = true
            // The client's Handshake packets proved the address the handshake ran on (RFC 9000 §8.1).
            if connection.role == .server { connection.peerAddresses.validate(connection.currentRemote) }
            if connection.role == .client, connection.negotiatedALPN != connection.parameters.alpn {
                connection.callbackFailure = TransportError(
                    .alpnMismatch,
                    "the server did not select the application protocol \(connection.parameters.alpn)")
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            return connection.handshakeDidComplete()
        }
        cb.recv_stream_data = { _, flags, streamID, _, data, length, userData, _ in
            let bytes = length > 0 ? Array(UnsafeBufferPointer(start: data, count: length)) : []
            let connection = QUICCallbacks.owner(userData)
            if length > 0 { connection.applicationHeld[streamID, default: 0] += UInt64(length) }
            connection.record(
                .streamData(
                    streamID, bytes, fin: flags & UInt32(NGTCP2_STREAM_DATA_FLAG_FIN) != 0,
                    isEarly: flags & UInt32(PTT_STREAM_DATA_FLAG_EARLY) != 0))
            return 0
        }
        cb.stream_open = { _, streamID, userData in
            let connection = QUICCallbacks.owner(userData)
            if ngtcp2_is_bidi_stream(streamID) != 0 {
                connection.sendBuffers[streamID] = StreamSendBuffer()
                connection.peerOpenedStreams.insert(streamID)
            }
            connection.record(.streamOpened(streamID))
            return 0
        }
        cb.stream_close = { conn, _, streamID, _, userData, _ in
            let connection = QUICCallbacks.owner(userData)
            // A long-lived connection opens a stream per exchange: without this the peer could open only the
            // initial limit's worth over the connection's whole life. (ngtcp2 itself returns the credit of a stream
            // closed before `stream_open` ran, so only the ones it reported are counted here.)
            if connection.peerOpenedStreams.remove(streamID) != nil, let conn {
                ngtcp2_conn_extend_max_streams_bidi(conn, 1)
            }
            connection.forgetStream(streamID)
            connection.record(.streamClosed(streamID))
            return 0
        }
        cb.stream_reset = { _, streamID, _, code, userData, _ in
            let connection = QUICCallbacks.owner(userData)
            connection.releaseHeld(streamID)  // the inbox drops them: a reset stream keeps no connection credit
            connection.record(.streamReset(streamID, code: code))
            return 0
        }
        cb.stream_stop_sending = { _, streamID, code, userData, _ in
            let connection = QUICCallbacks.owner(userData)
            connection.dropSendState(streamID)
            connection.record(.stopSending(streamID, code: code))
            return 0
        }
        cb.acked_stream_data_offset = { _, streamID, offset, length, userData, _ in
            let connection = QUICCallbacks.owner(userData)
            connection.sendBuffers[streamID]?.acknowledge(upTo: offset + length)
            connection.retiredSendBuffers[streamID]?.acknowledge(upTo: offset + length)
            connection.record(.streamWritable(streamID))
            return 0
        }
        cb.extend_max_local_streams_bidi = { _, _, userData in
            QUICCallbacks.owner(userData).record(.streamsAvailable)
            return 0
        }
        cb.extend_max_stream_data = { _, streamID, _, userData, _ in
            QUICCallbacks.owner(userData).blockedStreams.remove(streamID)
            return 0
        }
        cb.recv_datagram = { _, flags, data, length, userData in
            let connection = QUICCallbacks.owner(userData)
            connection.counters.datagramsReceived += 1
            let bytes = length > 0 ? Array(UnsafeBufferPointer(start: data, count: length)) : []
            connection.record(.datagram(bytes, isEarly: flags & UInt32(PTT_DATAGRAM_FLAG_EARLY) != 0))
            return 0
        }
        cb.ack_datagram = { _, _, userData in
            QUICCallbacks.owner(userData).counters.datagramsAcknowledged += 1
            return 0
        }
        cb.lost_datagram = { _, _, userData in
            QUICCallbacks.owner(userData).counters.datagramsLost += 1
            return 0
        }
        ptt_callbacks_set_recv_new_token(&cb) { _, token, length, userData in
            QUICCallbacks.owner(userData).record(.newToken(Array(UnsafeBufferPointer(start: token, count: length))))
            return 0
        }
        cb.recv_stateless_reset = { _, _, userData in
            QUICCallbacks.owner(userData).receivedStatelessReset = true
            return 0
        }
        ptt_callbacks_set_path_validation(&cb) { _, _, path, result, userData in
            let (local, remote) = (path!.pointee.local, path!.pointee.remote)
            let connection = QUICCallbacks.owner(userData)
            let peer = remote.addr.map { SocketAddress(copying: $0, length: remote.addrlen) } ?? SocketAddress()
            let succeeded = result != 0
            if succeeded, connection.role == .server { connection.peerAddresses.validate(peer) }
            connection.pathValidationDidFinish(
                local: local.addr.map { SocketAddress(copying: $0, length: local.addrlen) } ?? SocketAddress(),
                remote: peer, succeeded: succeeded)
            return 0
        }
        cb.handshake_confirmed = { _, userData in
            let connection = QUICCallbacks.owner(userData)
            connection.isHandshakeConfirmed = true
            connection.frameGuard.handshakeConfirmed()
            return 0
        }
        ptt_callbacks_set_early_data_rejected(&cb) { _, userData in
            QUICCallbacks.owner(userData).earlyDataWasRejected()
            return 0
        }
        return cb
    }
}
