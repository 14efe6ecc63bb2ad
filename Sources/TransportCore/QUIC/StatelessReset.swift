internal import CNgtcp2
internal import CTransportShims

/// Stateless resets (RFC 9000 §10.3): a packet that looks like any short-header packet and ends with the token the
/// server derived from one of its connection IDs and its reset secret; the client that holds that ID recognises
/// it and drops the connection at once.
package enum StatelessReset {
    /// A reset of `length` bytes (22…43) for the connection that holds `cid`, its unpredictable bytes from `random`
    /// (the kernel's generator by default); nil if ngtcp2 cannot write it.
    package static func packet(
        secret: [UInt8], cid: ConnectionID, length: Int = 43, random source: any RandomSource = SystemRandom()
    ) -> [UInt8]? {
        let length = min(max(length, 22), 43)
        let token = QUICConnection.statelessResetToken(secret: secret, cid: cid)
        var random = source.bytes(length - token.count)  // ngtcp2 writes these, then the token
        var reply = [UInt8](repeating: 0, count: length)
        let n = ngtcp2_pkt_write_stateless_reset(&reply, reply.count, token, &random, random.count)
        return n > 0 ? Array(reply.prefix(Int(n))) : nil
    }
}

extension QUICConnection {
    /// Server: the connection IDs this side issued and the peer may address it by now (the handshake's and those
    /// of NEW_CONNECTION_ID frames not yet retired).
    package var issuedConnectionIDs: [ConnectionID] {
        guard let conn else { return [] }
        var scids = [ngtcp2_cid](repeating: ngtcp2_cid(), count: ptt_conn_get_num_scid(conn))
        let count = ngtcp2_conn_get_scid(conn, &scids)
        return scids.prefix(count).map(ConnectionID.init)
    }
}
