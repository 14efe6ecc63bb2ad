import TransportCore
import TransportIO

extension TransportConnection {
    /// Relay side: pushes `message` to the client on this connection's notice stream — a bidirectional stream this
    /// side opens with the first push and keeps for every later one, so the client reads the pushes in the order
    /// they were made (a `TransportLink` reads them on `TransportLink.notices`, across its reconnects). A push is
    /// not stored: a client that is away (suspended, reconnecting) misses it, so push state (who talks, the queue
    /// position) again when the client rejoins.
    ///
    /// - Throws: the errors of `openStream()` and `TransportStream.send(_:)` (`messageEmpty`, `messageTooLarge`, the
    ///   connection's close error); `CancellationError`.
    public func pushNotice(_ message: [UInt8]) async throws {
        let opening = noticeStream.withLock { opening -> Task<IncomingStreamHandle, any Error> in
            if let opening { return opening }
            let opened = Task { [backend] in try await backend.openStream() }
            opening = opened
            return opened
        }
        try await TransportStream(handle: try await opening.value, connection: self).send(message)
    }
}
