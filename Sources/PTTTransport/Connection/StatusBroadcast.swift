import Dispatch
import TransportCore
import TransportIO

/// A connection's status for any number of subscribers: each one gets the current status at once, then every
/// change up to `.closed`. The loop publishes; subscribers and `closed()` waiters may be on any task.
package final class StatusBroadcast: Sendable {
    private struct State {
        var current = ConnectionStatus.connecting
        var subscribers: [UInt64: AsyncStream<ConnectionStatus>.Continuation] = [:]
        var closeWaiters: [UInt64: CheckedContinuation<CloseReason?, Never>] = [:]
        /// Run on the loop as the connection closes, before any subscriber or `closed()` waiter hears it.
        var closeHandlers: [@Sendable () -> Void] = []
        var nextID: UInt64 = 0

        mutating func makeID() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    private let state = Locked(State())

    /// The latest status.
    var current: ConnectionStatus { state.withLock { $0.current } }

    /// Loop side: a new status. Nothing follows `.closed`.
    func publish(_ status: ConnectionStatus) {
        typealias Ended = (
            subscribers: [AsyncStream<ConnectionStatus>.Continuation],
            waiters: [CheckedContinuation<CloseReason?, Never>], reason: CloseReason,
            handlers: [@Sendable () -> Void]
        )
        let ended = state.withLock { (state: inout State) -> Ended? in
            if case .closed = state.current { return nil }
            state.current = status
            // Yielded under the lock, so a subscriber that joins now cannot see its first status after this one.
            for subscriber in state.subscribers.values { subscriber.yield(status) }
            guard case .closed(let reason) = status else { return nil }
            let ended = Ended(
                Array(state.subscribers.values), Array(state.closeWaiters.values), reason, state.closeHandlers)
            state.subscribers.removeAll()
            state.closeWaiters.removeAll()
            state.closeHandlers.removeAll()
            return ended
        }
        guard let ended else { return }
        // First what the loop's own users do about the close (a channel's floor publishes its release), so that
        // whoever awaits `closed()` finds it done.
        for handler in ended.handlers { handler() }
        // Outside the lock: `finish` runs the subscriber's termination handler, which takes the lock.
        for subscriber in ended.subscribers { subscriber.finish() }
        for waiter in ended.waiters { waiter.resume(returning: ended.reason) }
    }

    /// A new subscription: the current status, then every change, ending after `.closed`.
    package func subscribe() -> AsyncStream<ConnectionStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionStatus.self)
        let id = state.withLock { $0.makeID() }
        continuation.onTermination = { [weak self] _ in
            // Off this thread: see `ValueBroadcast.subscribe` (a cancelled task runs this holding its status lock,
            // which `publish` needs while it holds ours).
            guard let self else { return }
            DispatchQueue.global().async { self.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        }
        let alreadyClosed = state.withLock { state in
            continuation.yield(state.current)
            if case .closed = state.current { return true }
            state.subscribers[id] = continuation
            return false
        }
        if alreadyClosed { continuation.finish() }
        return stream
    }

    /// Loop side: runs `handler` on the loop as the connection closes, before `closed()` returns to anyone. False
    /// (and `handler` never runs) when it has closed already.
    package func onClose(_ handler: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            if case .closed = state.current { return false }
            state.closeHandlers.append(handler)
            return true
        }
    }

    /// Waits for `.closed`; nil when the waiting task was cancelled first.
    package func closed() async -> CloseReason? {
        let id = state.withLock { $0.makeID() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<CloseReason?, Never>) in
                // Checked under the lock that `onCancel` and `publish` take, so neither the close nor the
                // cancellation can slip by.
                let answer: CloseReason?? = state.withLock { state in
                    if case .closed(let reason) = state.current { return .some(reason) }
                    if Task.isCancelled { return .some(nil) }
                    state.closeWaiters[id] = continuation
                    return .none
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            state.withLock { $0.closeWaiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }
}
