internal import CNgtcp2
internal import CTransportShims

extension QUICConnection {
    /// Starts a key update (RFC 9001 §6): this endpoint's next 1-RTT packets use the next key phase, and the peer
    /// follows when it sees them. Long calls renew their keys this way without a new handshake.
    ///
    /// Every condition under which ngtcp2 0.12.1 would assert (a call before the handshake completed, or while
    /// closing or draining) or refuse is checked first and reported as a `TransportError`.
    package func initiateKeyUpdate(now: UInt64) throws(TransportError) {
        guard !isClosed, closingPacket == nil, let conn, ptt_conn_in_closing_period(conn) == 0,
            ptt_conn_in_draining_period(conn) == 0
        else {
            throw closeReason?.error ?? TransportError(.connectionClosed, "the connection is closed")
        }
        guard isHandshakeConfirmed else {
            throw TransportError(
                .keyUpdateNotReady,
                "the handshake is not confirmed yet (HANDSHAKE_DONE has not arrived); retry after a round trip")
        }
        let rv = ngtcp2_conn_initiate_key_update(conn, now)
        switch rv {
        case 0:
            counters.keyUpdates += 1
        case NGTCP2_ERR_INVALID_STATE:
            throw TransportError(
                .keyUpdateNotReady,
                "the previous key update is not confirmed by the peer yet, or came less than three probe timeouts "
                    + "ago; retry shortly", libraryCode: Int(rv))
        default:
            throw ngtcp2Failure(rv, "starting a key update")
        }
    }
}
