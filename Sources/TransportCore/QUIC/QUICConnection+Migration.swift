internal import CNgtcp2
internal import CTransportShims

/// How a client migration that `startMigration(to:now:)` began ended.
package struct MigrationOutcome: Sendable, Equatable {
    /// The local address the connection tried to move to.
    package var local: SocketAddress
    /// The peer answered on the new path (PATH_RESPONSE): the connection now uses it. False: the probe timed
    /// out or was aborted, and the connection stays on the path it had.
    package var succeeded: Bool
}

extension QUICConnection {
    /// Client: starts moving the connection to `local` (same peer) without a new handshake. ngtcp2 probes the new
    /// path with PATH_CHALLENGE under a connection ID from the peer's spare pool; the connection keeps using its
    /// current path until the peer answers there, then moves (a `MigrationOutcome` from `takeMigrationOutcome()`
    /// says when). Every condition under which ngtcp2 0.12.1 would refuse (or, for a server, abort) is checked
    /// first and reported as a `TransportError`; the connection is untouched when this throws.
    package func startMigration(to local: SocketAddress, now: UInt64) throws(TransportError) {
        if let refusal = migrationRefusal(toward: local) { throw refusal }
        var storage = ngtcp2_path_storage()
        fillPathStorage(&storage, local, currentRemote)
        let rv = ngtcp2_conn_initiate_migration(conn!, &storage.path, now)
        switch rv {
        case 0:
            migrationTarget = local
        case NGTCP2_ERR_CONN_ID_BLOCKED:
            throw TransportError(
                .migrationNotReady,
                "the server has not issued a spare connection ID (NEW_CONNECTION_ID) for a new path yet; retry "
                    + "shortly", libraryCode: Int(rv))
        case NGTCP2_ERR_INVALID_ARGUMENT:
            throw TransportError(
                .migrationUnsupported, "the connection already uses \(local) as its local address",
                libraryCode: Int(rv))
        case NGTCP2_ERR_INVALID_STATE:
            throw TransportError(
                .migrationUnsupported,
                "this connection cannot migrate (the server uses zero-length connection IDs, or the client is moving "
                    + "to the server's preferred address); reconnect instead", libraryCode: Int(rv))
        default:
            throw ngtcp2Failure(rv, "starting the migration")
        }
    }

    /// Why the connection cannot start migrating to an address of `local`'s family now (nil: it can try). The
    /// conditions ngtcp2 0.12.1 reports only as a bare error code, or (a server calling it) asserts on.
    package func migrationRefusal(toward local: SocketAddress) -> TransportError? {
        guard role == .client else {
            return TransportError(
                .migrationUnsupported, "only a client can move a connection to a new local address")
        }
        guard !isClosed, let conn else {
            return closeReason?.error ?? TransportError(.connectionClosed, "the connection is closed")
        }
        if let target = migrationTarget {
            return TransportError(
                .migrationNotReady,
                "a migration to \(target) is still validating its path; wait for it to finish, then migrate again")
        }
        guard isHandshakeConfirmed else {
            return TransportError(
                .migrationNotReady,
                "the handshake is not confirmed yet (the server's HANDSHAKE_DONE has not arrived); "
                    + "a connection can migrate about one round trip after it is ready: retry then")
        }
        if let params = ngtcp2_conn_get_remote_transport_params(conn), params.pointee.disable_active_migration != 0 {
            return TransportError(
                .migrationUnsupported,
                "the server disabled active migration (disable_active_migration); reconnect from the new address")
        }
        guard local.family == currentRemote.family else {
            return TransportError(
                .migrationUnsupported,
                "\(local) is not in the address family of the server's \(currentRemote); "
                    + "choose a local address of the same family, or reconnect")
        }
        return nil
    }

    /// Whether a migration started by `startMigration(to:now:)` is still validating its new path.
    package var isMigrating: Bool { migrationTarget != nil }

    /// The result of the last migration, once its path validation ended (nil while it runs or when none ran);
    /// reading it clears it.
    package func takeMigrationOutcome() -> MigrationOutcome? {
        defer { finishedMigration = nil }
        return finishedMigration
    }

    /// The local address of the packet `writePacket` just wrote: while a migration validates its path, the
    /// PATH_CHALLENGE goes out from the new address and everything else from the current one. A client sends
    /// each packet from the socket bound there.
    package var packetLocal: SocketAddress {
        let local = path.pointee.path.local
        guard let address = local.addr, local.addrlen > 0 else { return SocketAddress() }
        return SocketAddress(copying: address, length: local.addrlen)
    }

    /// One probe timeout (PTO) of the current path.
    package var probeTimeout: UInt64 {
        guard let conn else { return 0 }
        return ngtcp2_conn_get_pto(conn)
    }

    /// The local address of the connection's current path (the new one once a migration succeeded).
    package var currentLocal: SocketAddress {
        guard let conn, let current = ngtcp2_conn_get_path(conn), let address = current.pointee.local.addr,
            current.pointee.local.addrlen > 0
        else { return SocketAddress() }
        return SocketAddress(copying: address, length: current.pointee.local.addrlen)
    }

    /// From the `path_validation` callback: records a path's validation result, and settles a pending client
    /// migration when the path is the one it probes.
    func pathValidationDidFinish(local: SocketAddress, remote: SocketAddress, succeeded: Bool) {
        if role == .client, let target = migrationTarget, target == local {
            migrationTarget = nil
            finishedMigration = MigrationOutcome(local: local, succeeded: succeeded)
            if succeeded { counters.migrations += 1 }
        }
        serverPathValidationDidFinish(succeeded: succeeded)
        record(.pathValidated(remote: remote, succeeded: succeeded))
    }
}
