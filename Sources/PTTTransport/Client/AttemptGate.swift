import TransportCore
import TransportIO

/// When a connection attempt that waits behind another may start: at once when the one before it failed or was
/// refused (`goNow`), or once `delay` has passed without the one before hearing from the server; an attempt whose
/// predecessor heard from the server waits for that one to fail. Used between QUIC and TCP in a race and between
/// the addresses of one name. Thread-safe: loop-thread callbacks and the racing tasks use it.
final class AttemptGate: Sendable {
    private struct State {
        var goNow: Bool
        var delayPassed = false
        var heard = false
        var waiter: CheckedContinuation<Void, Never>?

        var open: Bool { goNow || (delayPassed && !heard) }

        /// The waiter to resume when the gate just opened.
        mutating func takeWaiterIfOpen() -> CheckedContinuation<Void, Never>? {
            guard open else { return nil }
            defer { waiter = nil }
            return waiter
        }
    }
    private let state: Locked<State>

    /// A gate; `goNow` opens it from the start (the saved state says TCP worked last time).
    init(goNow: Bool = false) { state = Locked(State(goNow: goNow)) }

    /// The attempt before heard from the server: the next one need not start after the delay.
    func heardFromServer() { state.withLock { $0.heard = true } }

    /// Opens the gate now (the attempt before failed or was refused, or the race is over).
    func goNow() { update { $0.goNow = true } }

    private func update(_ change: (inout State) -> Void) {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            return state.takeWaiterIfOpen()
        }?.resume()
    }

    /// Waits until the waiting attempt may start; false when its task was cancelled meanwhile (the race is over:
    /// whoever ends it calls `goNow` after cancelling, so this returns).
    func waitForTurn(delay: Duration) async -> Bool {
        let timer = Task { [self] in
            try? await Task.sleep(for: delay)
            update { $0.delayPassed = true }
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        return !Task.isCancelled
    }
}
