import PTTTransport
import TransportCore
import TransportIO

/// Runs a relay's `WakeSender` off its event loops: a bounded queue of requests (`enqueue` never waits), at most
/// `concurrency` calls at once, each raced against the timeout; everything counted in `WakeStatistics`.
final class WakeDispatch: Sendable {
    private struct State {
        var queue: [(request: WakeRequest, since: UInt64)] = []
        var idle: [CheckedContinuation<(request: WakeRequest, since: UInt64)?, Never>] = []
        var statistics = WakeStatistics()
        var stopped = false
    }

    private let sender: any WakeSender
    private let policy: WakeHookPolicy
    private let state = Locked(State())

    init(sender: any WakeSender, policy: WakeHookPolicy) {
        self.sender = sender
        self.policy = policy
        for _ in 0..<max(1, policy.concurrency) { Task { [self] in await work() } }
    }

    deinit { stop() }

    /// Any thread: queues a request (`since`: the floor request's arrival, MonotonicClock), or drops and counts it
    /// when the queue is full. Never waits.
    func enqueue(_ request: WakeRequest, since: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<(request: WakeRequest, since: UInt64)?, Never>? in
            guard !state.stopped else { return nil }
            if request.members.isEmpty {
                state.statistics.nobodyToWake &+= 1
                return nil
            }
            if !state.idle.isEmpty { return state.idle.removeFirst() }
            guard state.queue.count < max(0, policy.queueLimit) else {
                state.statistics.dropped &+= 1
                return nil
            }
            state.queue.append((request, since))
            return nil
        }
        waiter?.resume(returning: (request, since))
    }

    var statistics: WakeStatistics { state.withLock { $0.statistics } }

    /// Ends the workers (requests still queued are dropped, not counted).
    func stop() {
        let waiters = state.withLock { state in
            state.stopped = true
            state.queue.removeAll()
            defer { state.idle.removeAll() }
            return state.idle
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    private func next() async -> (request: WakeRequest, since: UInt64)? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> (request: WakeRequest, since: UInt64)?? in
                if state.stopped { return .some(nil) }
                if !state.queue.isEmpty { return .some(state.queue.removeFirst()) }
                state.idle.append(continuation)
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func work() async {
        while let (request, since) = await next() {
            let handed = MonotonicClock.now()
            state.withLock { state in
                state.statistics.requests &+= 1
                state.statistics.members &+= UInt64(request.members.count)
                if !request.isLateAddition && state.statistics.handOffLatencies.count < 10_000 {
                    state.statistics.handOffLatencies.append(.nanoseconds(Int64(clamping: handed &- since)))
                }
            }
            let (outcome, call) = await self.call(request)
            state.withLock { state in
                switch outcome {
                case .delivered: break
                case .failed: state.statistics.failures &+= 1
                case .timedOut: state.statistics.timeouts &+= 1
                }
            }
            // After a timeout this worker's place stays taken until the abandoned call returns: a hook that hangs for
            // good keeps its place, so hung calls never pile up (later bursts queue, then drop, counted).
            if outcome == .timedOut { await call.value }
        }
    }

    private enum Outcome: Sendable { case delivered, failed, timedOut }

    /// Calls the sender, racing the timeout: returns at the first of the two (the call is cancelled on a timeout),
    /// with the call's task.
    private func call(_ request: WakeRequest) async -> (Outcome, Task<Void, Never>) {
        let finished = Locked<CheckedContinuation<Outcome, Never>?>(nil)
        let running = Locked<Task<Void, Never>?>(nil)
        let outcome = await withCheckedContinuation { continuation in
            finished.withLock { $0 = continuation }
            let finish: @Sendable (Outcome) -> Void = { outcome in
                finished.withLock { $0.take() }?.resume(returning: outcome)
            }
            let timer = Task { [policy] in
                try? await Task.sleep(for: policy.timeout)
                if !Task.isCancelled {
                    finish(.timedOut)
                    running.withLock { $0 }?.cancel()
                }
            }
            running.withLock {
                $0 = Task { [sender] in
                    do {
                        try await sender.wake(request)
                        finish(.delivered)
                    } catch {
                        finish(.failed)
                    }
                    timer.cancel()
                }
            }
        }
        return (outcome, running.withLock { $0 }!)
    }
}
