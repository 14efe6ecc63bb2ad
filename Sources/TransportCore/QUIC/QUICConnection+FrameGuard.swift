internal import CNgtcp2
internal import CTransportShims

/// How a connection applies its frame guard and, at a server, its path rules (`FrameGuard`, `PathChangeRules`).
extension QUICConnection {
    /// Whether `path` is the connection's current path in ngtcp2.
    func isCurrentPath(_ path: UnsafePointer<ngtcp2_path>) -> Bool {
        guard let current = ngtcp2_conn_get_path(conn) else { return false }
        return ngtcp2_path_eq(current, path) != 0
    }

    /// Whether a received packet may reach ngtcp2: at a server, one from another path only as `PathChangeRules`
    /// allow (a client's socket is connected to its server, and ngtcp2 ignores anything else there).
    func admitsPacket(
        _ packet: UnsafeRawBufferPointer, on packetPath: UnsafePointer<ngtcp2_path>, local: SocketAddress,
        fromCurrentPath: Bool, now: UInt64
    ) -> Bool {
        guard role == .server else { return true }
        // While a path change settles, a NEW_CONNECTION_ID could make ngtcp2 retire and replace the IDs its
        // validations hold (current, validated, fallback), which the rules below reason about: such a packet is
        // dropped, on any path (the peer sends the frame again once the change has settled).
        frameGuard.dropsNewConnectionIDs = pathRules.isTracking(at: now)
        guard !fromCurrentPath else { return true }
        let keepsConnectionID =
            pathRules.isTracking && !peerSentPathChallenge && local == currentLocal
            && frameGuard.hasEpisodeDestinationID(packet)
        guard
            pathRules.refusal(
                fromCurrentPath: false, keepsConnectionID: keepsConnectionID,
                sequenceNumbersSeen: frameGuard.sequenceNumbersSeen, now: now) == nil
        else { return false }
        // A packet from another path may move the connection back to ngtcp2's fallback. If it also answered the
        // validation through an undersized challenge, ngtcp2 would start PMTUD on that success and then assert on
        // the move back (`!conn->pmtud`), both in this one read. Which path is the fallback depends on every change
        // since the validation began (a change while one runs inherits its fallback), so while any may fall back, a
        // PATH_RESPONSE reaches ngtcp2 only from the current path (the peer answers the next challenge there).
        frameGuard.dropsPathResponses = pathRules.validating
        return true
    }

    /// After a server's read: starts following a path change, and keeps the largest PTO while it does. A move back
    /// to ngtcp2's fallback path is not a new change: it ended that validation.
    ///
    /// ngtcp2's fallback is the path left, unless the change dropped a validation that falls back: then the new one
    /// inherits that validation's fallback. Dropping it calls `path_validation` with a result other than success (for
    /// a validation that may fall back; the silent ones end without a callback), so a move in a read that saw such a
    /// callback inherited the fallback, and a move to that fallback is the move back.
    func notePathAfterRead(
        _ packet: UnsafeRawBufferPointer, wasCurrentPath: Bool, packetPath: UnsafePointer<ngtcp2_path>
    ) {
        guard role == .server else { return }
        // ngtcp2 binds one of the peer's IDs to the path of a PATH_CHALLENGE it answers when that path is neither the
        // current one nor a validation's by then, which a PATH_CHALLENGE from the current path followed by a path
        // change in the same batch also does (the long fuzz run's third route): after any PATH_CHALLENGE, a path
        // change may take a bound ID.
        if frameGuard.readPathChallenge { peerSentPathChallenge = true }
        if !wasCurrentPath && isCurrentPath(packetPath) {
            let inherited = validationDroppedDuringRead
            let movedBack = inherited && ngtcp2_path_eq(&previousPath.pointee.path, packetPath) != 0
            if !movedBack {
                pathRules.pathChanged(pto: ngtcp2_conn_get_pto(conn))
                frameGuard.forgetChallenges()
                frameGuard.noteEpisodeDestinationID(of: packet, idLength: QUICConnection.serverIDLength)
            }
            if !inherited { copyPath(&leavingPath.pointee.path, into: previousPath) }
        } else if pathRules.isTracking {
            pathRules.observe(pto: ngtcp2_conn_get_pto(conn))
        }
    }

    /// From the `path_validation` callback, at a server: the validation that may fall back may have ended. (Reads
    /// the PTO ngtcp2 sizes its re-validation with: a getter, safe inside a callback.)
    func serverPathValidationDidFinish(succeeded: Bool) {
        guard role == .server else { return }
        if !succeeded { validationDroppedDuringRead = true }
        pathRules.validationEnded(
            succeeded: succeeded, answeredUndersizedChallenge: frameGuard.answeredUndersizedChallenge,
            pto: ngtcp2_conn_get_pto(conn), now: lastReadTime)
    }

    /// Before a server reads a packet from another path: remembers the current path, which a path change leaves.
    func rememberPathBeforeRead() {
        validationDroppedDuringRead = false
        guard role == .server, let current = ngtcp2_conn_get_path(conn) else { return }
        copyPath(current, into: leavingPath)
    }

    /// Copies a path into a storage (a path points into its own storage, so a plain copy would not do).
    private func copyPath(_ path: UnsafePointer<ngtcp2_path>, into storage: UnsafeMutablePointer<ngtcp2_path_storage>) {
        ngtcp2_path_storage_init(
            storage, path.pointee.local.addr, path.pointee.local.addrlen, path.pointee.remote.addr,
            path.pointee.remote.addrlen, nil)
    }

    /// Packets from another path kept from ngtcp2 by the path rules.
    package var pathPacketsRefused: UInt64 { pathRules.refusedPackets }

    /// Closes the connection after the frame guard refused a packet: PROTOCOL_VIOLATION for a NEW_CONNECTION_ID that
    /// would retire a sequence number again or retires IDs before the handshake is confirmed (client),
    /// CRYPTO_ERROR(unexpected_message) for a TLS message in 1-RTT.
    func closeRefused(_ refusal: FrameGuard.Refusal, now: UInt64) {
        let (code, reason, error): (UInt64, String, TransportError)
        /// PROTOCOL_VIOLATION with `reason` on the wire, and `what` the peer did in the local error.
        func protocolViolation(_ reason: String, _ what: String) -> (UInt64, String, TransportError) {
            let message = what + "; the connection was closed with PROTOCOL_VIOLATION"
            return (
                UInt64(NGTCP2_PROTOCOL_VIOLATION), reason,
                TransportError(.protocolViolation, message, transportErrorCode: 0x0a)
            )
        }
        switch refusal {
        case .retiresAgain(let sequence):
            (code, reason, error) = protocolViolation(
                "NEW_CONNECTION_ID would retire sequence number \(sequence) again",
                "the peer sent a NEW_CONNECTION_ID that would retire sequence number \(sequence) a second time")
        case .retiresBeforeConfirmation(let retirePriorTo):
            (code, reason, error) = protocolViolation(
                "NEW_CONNECTION_ID retiring IDs before the handshake is confirmed",
                "the server sent a NEW_CONNECTION_ID with retire_prior_to \(retirePriorTo) before the handshake was "
                    + "confirmed")
        case .tlsMessageIn1RTT(let type):
            code = 0x10a  // CRYPTO_ERROR with TLS alert 10, unexpected_message (RFC 9001 §6 for KeyUpdate)
            reason = "TLS handshake message type \(type) is not allowed in 1-RTT packets"
            error = TransportError(
                .protocolViolation,
                "the peer sent a TLS handshake message of type \(type)\(type == 24 ? " (KeyUpdate)" : "") in a 1-RTT "
                    + "packet, which QUIC forbids; the connection was closed with CRYPTO_ERROR (unexpected_message)",
                transportErrorCode: 0x10a)
        }
        var ccerr = ptt_ccerr()
        reason.utf8CString.withUnsafeBufferPointer { text in
            text.withMemoryRebound(to: UInt8.self) {
                // ngtcp2 copies the reason into the CONNECTION_CLOSE it writes here.
                ptt_ccerr_set_transport_error(&ccerr, code, $0.baseAddress, $0.count - 1)
                writeClose(&ccerr, now: now)
            }
        }
        finish(.failed(error))
    }
}
