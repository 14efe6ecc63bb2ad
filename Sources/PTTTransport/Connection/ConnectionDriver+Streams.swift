import TransportCore
import TransportIO

/// Opening streams, for both transports: a stream opens at once when the peer's stream limit allows, else the
/// caller waits, in order, until the peer grants more (`retryPendingOpens`, after each read) or the connection ends;
/// a cancelled wait ends with `CancellationError` at once.
extension ConnectionDriver {
    /// Opens a bidirectional stream, waiting while the peer's stream limit is reached.
    func openStream() async throws -> IncomingStreamHandle {
        let ticket = PendingOpenTicket()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                loop.execute { [self] in
                    do {
                        if ticket.isCancelled {
                            continuation.resume(throwing: CancellationError())
                        } else if let id = try core.openBidirectionalStream() {
                            continuation.resume(returning: sinks.openStream(id))
                            processSoon()  // QMux: the stream's first frame
                        } else {
                            sinks.pendingOpens.append((ticket, continuation))
                        }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                } orIfStopped: {
                    continuation.resume(throwing: TransportError(.cancelled, "the event loop has stopped"))
                }
            }
        } onCancel: {
            ticket.cancel()
            loop.execute { [self] in sinks.cancelPendingOpen(ticket) }
        }
    }

    /// Relay draining until `deadline` (monotonic): asks the client to move (a `RelayNotice` on a stream of its
    /// own), telling it how long it has; once. Nothing while the handshake is not done (the server driver asks again
    /// when it is) or when the client allows no such stream (an older client: it gets nothing). Loop only.
    func askToMove(before deadline: UInt64) {
        guard !sinks.relayNoticeSent, let id = try? core.openUnidirectionalStream() else { return }
        sinks.relayNoticeSent = true
        let now = MonotonicClock.now()
        let notice = RelayNotice.move(closingIn: deadline > now ? (deadline - now) / 1_000_000 : 0)
        try? core.queue(stream: id, notice.encoded(), fin: true)
        processSoon()
    }

    /// Opens streams for the callers waiting, in order, as far as the peer's limit now allows (called by the
    /// driver's processing, which then flushes).
    func retryPendingOpens() {
        while let (_, waiter) = sinks.pendingOpens.first {
            do {
                guard let id = try core.openBidirectionalStream() else { return }
                sinks.pendingOpens.removeFirst()
                waiter.resume(returning: sinks.openStream(id))
            } catch {
                sinks.pendingOpens.removeFirst()
                waiter.resume(throwing: error)
            }
        }
    }
}

/// One waiting `openStream()` call, known by identity in `ConnectionSinks.pendingOpens`: whether it was cancelled
/// before it reached the loop.
final class PendingOpenTicket: Sendable {
    private let cancelled = Locked(false)

    var isCancelled: Bool { cancelled.withLock { $0 } }

    func cancel() { cancelled.withLock { $0 = true } }
}
