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
    func admitsPacket(fromCurrentPath: Bool, now: UInt64) -> Bool {
        guard role == .server else { return true }
        return pathRules.refusal(
            fromCurrentPath: fromCurrentPath, sequenceNumbersSeen: frameGuard.sequenceNumbersSeen, now: now) == nil
    }

    /// After a server's read: starts following a path change, and keeps the largest PTO while it does.
    func notePathAfterRead(wasCurrentPath: Bool, packetPath: UnsafePointer<ngtcp2_path>) {
        guard role == .server else { return }
        if !wasCurrentPath && isCurrentPath(packetPath) {
            pathRules.pathChanged(pto: ngtcp2_conn_get_pto(conn))
            frameGuard.forgetChallenges()
        } else if pathRules.isTracking {
            pathRules.observe(pto: ngtcp2_conn_get_pto(conn))
        }
    }

    /// From the `path_validation` callback, at a server: the validation that may fall back may have ended. (Reads
    /// the PTO ngtcp2 sizes its re-validation with: a getter, safe inside a callback.)
    func serverPathValidationDidFinish(succeeded: Bool) {
        guard role == .server else { return }
        pathRules.validationEnded(
            succeeded: succeeded, answeredUndersizedChallenge: frameGuard.answeredUndersizedChallenge,
            pto: ngtcp2_conn_get_pto(conn), now: lastReadTime)
    }

    /// Packets from another path kept from ngtcp2 by the path rules.
    package var pathPacketsRefused: UInt64 { pathRules.refusedPackets }

    /// Closes the connection after the frame guard refused a packet: PROTOCOL_VIOLATION for a NEW_CONNECTION_ID that
    /// would retire a sequence number again, CRYPTO_ERROR(unexpected_message) for a TLS message in 1-RTT.
    func closeRefused(_ refusal: FrameGuard.Refusal, now: UInt64) {
        let (code, reason, error): (UInt64, String, TransportError)
        switch refusal {
        case .retiresAgain(let sequence):
            code = UInt64(NGTCP2_PROTOCOL_VIOLATION)
            reason = "NEW_CONNECTION_ID would retire sequence number \(sequence) again"
            error = TransportError(
                .protocolViolation,
                "the peer sent a NEW_CONNECTION_ID that would retire sequence number \(sequence) a second time; "
                    + "the connection was closed with PROTOCOL_VIOLATION", transportErrorCode: 0x0a)
        case .tlsMessageIn1RTT(let type):
            code = 0x10a  // CRYPTO_ERROR with TLS alert 10, unexpected_message (RFC 9001 §6 for KeyUpdate)
            reason = "TLS handshake message type \(type) is not allowed in 1-RTT packets"
            error = TransportError(
                .protocolViolation,
                "the peer sent a TLS handshake message of type \(type)\(type == 24 ? " (KeyUpdate)" : "") in a 1-RTT "
                    + "packet, which QUIC forbids; the connection was closed with CRYPTO_ERROR (unexpected_message)",
                transportErrorCode: 0x10a)
        }
        var ccerr = ngtcp2_connection_close_error()
        reason.utf8CString.withUnsafeBufferPointer { text in
            text.withMemoryRebound(to: UInt8.self) {
                // ngtcp2 copies the reason into the CONNECTION_CLOSE it writes here.
                ngtcp2_connection_close_error_set_transport_error(&ccerr, code, $0.baseAddress, $0.count - 1)
                writeClose(&ccerr, now: now)
            }
        }
        finish(.failed(error))
    }
}
