import TransportCore
import TransportIO

/// `openStream()` for both connection drivers (QUIC and QMux): a stream opens at once when the peer's stream limit
/// allows, else the caller waits, in order, until the peer grants more (`retryPendingOpens`, after each read) or the
/// connection ends; a cancelled wait ends with `CancellationError` at once.
protocol StreamOpening: AnyObject, Sendable {
    /// The driver's event loop; everything below runs on it.
    var loop: EventLoop { get }
    var sinks: ConnectionSinks { get }
    /// Opens a bidirectional stream in the core: its ID, or nil while the peer's limit is reached.
    func openStreamInCore() throws -> Int64?
    /// After `openStream()` opened a stream at once, off the driver's processing (to flush what opening it queued).
    func streamOpened()
    /// Opens a unidirectional stream in the core (for a `RelayNotice`): its ID, or nil when the peer allows none.
    func openNoticeStreamInCore() throws -> Int64?
    /// Queues bytes on a stream in the core and has them sent soon.
    func writeInCore(stream: Int64, _ bytes: [UInt8], fin: Bool) throws
}

extension StreamOpening {
    func openStreamWaitingForCredit() async throws -> IncomingStreamHandle {
        let ticket = PendingOpenTicket()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                loop.execute { [self] in
                    do {
                        if ticket.isCancelled {
                            continuation.resume(throwing: CancellationError())
                        } else if let id = try openStreamInCore() {
                            continuation.resume(returning: sinks.openStream(id))
                            streamOpened()
                        } else {
                            sinks.pendingOpens.append((ticket, continuation))
                        }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
        } onCancel: {
            ticket.cancel()
            loop.execute { [self] in sinks.cancelPendingOpen(ticket) }
        }
    }

    /// Relay: sends `notice` on a stream of its own, once; nothing while the handshake is not done (ask again)
    /// or when the client allows no such stream (an older client: it gets nothing).
    func sendRelayNotice(_ notice: RelayNotice) {
        loop.execute { [self] in
            guard !sinks.relayNoticeSent, let id = try? openNoticeStreamInCore() else { return }
            sinks.relayNoticeSent = true
            try? writeInCore(stream: id, notice.encoded(), fin: true)
        }
    }

    /// Opens streams for the callers waiting, in order, as far as the peer's limit now allows (called by the
    /// driver's processing, which then flushes).
    func retryPendingOpens() {
        while let (_, waiter) = sinks.pendingOpens.first {
            do {
                guard let id = try openStreamInCore() else { return }
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
