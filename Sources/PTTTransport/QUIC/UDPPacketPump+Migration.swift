import TransportCore
import TransportIO

/// A client migration waiting for its new path to be validated: the socket bound to the new local address, its
/// send batch, and the caller of `migrate(to:)`.
struct PendingMigration {
    let socket: UDPSocket
    let sender: UDPSendBatch
    let continuation: CheckedContinuation<String, any Error>
}

/// Client active migration, the socket side: a new socket bound to the new local address and connected to the same
/// server; the core (`QUICConnection+Migration.swift`) validates the path and moves the connection. Until the
/// server answers there, the old socket stays the connection's path; after, it is read for one more PTO (packets
/// the server sent before it followed), then closed.
extension UDPPacketPump {
    func migrate(_ driver: QUICConnectionDriver, to requested: SocketAddress) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            loop.execute { [self] in
                do throws(TransportError) {
                    try beginMigration(driver, to: requested, continuation)
                } catch {
                    continuation.resume(throwing: error)
                }
            } orIfStopped: {
                continuation.resume(throwing: TransportError(.cancelled, "the event loop has stopped"))
            }
        }
    }

    private func beginMigration(
        _ driver: QUICConnectionDriver, to requested: SocketAddress,
        _ continuation: CheckedContinuation<String, any Error>
    ) throws(TransportError) {
        guard isClient else {
            throw TransportError(
                .migrationUnsupported, "a relay's connection cannot migrate; only the client moves its end")
        }
        if let refusal = core.migrationRefusal(toward: requested) { throw refusal }
        let newSocket: UDPSocket
        do {
            newSocket = try UDPSocket(bindingTo: requested, connectingTo: remote)
        } catch {
            throw TransportError(
                error.code,
                "cannot open the new path from \(requested): \(error.message); the connection stays on \(local)",
                libraryCode: error.libraryCode)
        }
        let newSender: UDPSendBatch
        do {
            newSender = try UDPSendBatch(socket: newSocket, loop: loop)
            try loop.register(fd: newSocket.fd, events: EventLoop.readable) { [self] ready in
                if ready & EventLoop.writable != 0 { newSender.socketWritable() }
                if ready & ~EventLoop.writable != 0 { socketReadable(driver) }
            }
        } catch {
            newSocket.close()
            throw error
        }
        do {
            try core.startMigration(to: newSocket.localAddress, now: MonotonicClock.now())
        } catch {
            loop.unregister(fd: newSocket.fd)
            newSocket.close()
            throw error
        }
        migration = PendingMigration(socket: newSocket, sender: newSender, continuation: continuation)
        driver.process()
    }

    /// The client socket bound to `local`: the current path's unless a migration's new path or the path just
    /// left has that address.
    func clientSocket(for local: SocketAddress) -> UDPSocket {
        [migration?.socket, retiredSocket].lazy.compactMap { $0 }.first { $0.localAddress == local } ?? socket
    }

    /// The core settled the migration: move to the new socket, or stay and report why not.
    func migrationDidFinish(_ outcome: MigrationOutcome) {
        guard let pending = migration, pending.socket.localAddress == outcome.local else { return }
        migration = nil
        guard outcome.succeeded else {
            loop.unregister(fd: pending.socket.fd)
            pending.socket.close()
            pending.continuation.resume(
                throwing: TransportError(
                    .migrationFailed,
                    "the server did not answer on the new path from \(outcome.local) (path validation failed); "
                        + "the connection stays on \(local)"))
            return
        }
        sender.flush()
        retire(socket)
        socket = pending.socket
        sender = pending.sender
        local = pending.socket.localAddress
        pending.continuation.resume(returning: local.description)
    }

    /// Keeps reading the socket of the path the connection left for one PTO, then closes it.
    private func retire(_ old: UDPSocket) {
        closeRetiredSocket()
        retiredSocket = old
        let timer = retiredSocketTimerID ?? loop.makeTimerID()
        retiredSocketTimerID = timer
        loop.schedule(timer: timer, at: MonotonicClock.now() + max(core.probeTimeout, 1_000_000)) { [self] in
            closeRetiredSocket()
        }
    }

    private func closeRetiredSocket() {
        guard let old = retiredSocket else { return }
        retiredSocket = nil
        loop.unregister(fd: old.fd)
        old.close()
    }

    /// The connection ended while a migration was validating: close its socket and fail its caller.
    func abandonMigration(_ error: TransportError) {
        guard let pending = migration else { return }
        migration = nil
        loop.unregister(fd: pending.socket.fd)
        pending.socket.close()
        pending.continuation.resume(throwing: error)
    }
}
