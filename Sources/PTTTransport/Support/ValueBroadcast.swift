import Dispatch
import TransportCore
import TransportIO

/// The latest value of something that changes, for any number of subscribers: each gets the current value (if
/// there is one) at once, then every new one, until `finish`. The event loop publishes; subscribers may be on any
/// task. A slow subscriber keeps only the newest value it has not read (older ones are superseded), unless the
/// broadcast buffers every value.
final class ValueBroadcast<Value: Sendable>: Sendable {
    private struct State {
        var current: Value?
        var finished = false
        var subscribers: [UInt64: AsyncStream<Value>.Continuation] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())
    private let buffering: AsyncStream<Value>.Continuation.BufferingPolicy

    /// A broadcast whose subscribers keep the newest unread value only (`.bufferingNewest(1)`, the default), or
    /// every value (`.unbounded`, for a status sequence where each step matters).
    init(buffering: AsyncStream<Value>.Continuation.BufferingPolicy = .bufferingNewest(1)) {
        self.buffering = buffering
    }

    /// The latest value published, if any.
    var current: Value? { state.withLock { $0.current } }

    /// Loop side: a new value. Ignored after `finish`.
    func publish(_ value: Value) {
        state.withLock { state in
            guard !state.finished else { return }
            state.current = value
            // Under the lock, so a subscriber that joins now cannot see its first value after this one.
            for subscriber in state.subscribers.values { subscriber.yield(value) }
        }
    }

    /// Loop side: no more values; every subscription ends (the last value stays readable as `current`). With
    /// `last`, that value is published first, atomically: no other value can slip in after it.
    func finish(with last: Value? = nil) {
        let ended = state.withLock { state -> [AsyncStream<Value>.Continuation] in
            if let last, !state.finished {
                state.current = last
                for subscriber in state.subscribers.values { subscriber.yield(last) }
            }
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        // Outside the lock: `finish` runs the termination handler, which takes the lock.
        for subscriber in ended { subscriber.finish() }
    }

    /// A new subscription: the current value if any, then every new one, ending at `finish`.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: buffering)
        let ended = state.withLock { state -> Bool in
            if let current = state.current { continuation.yield(current) }
            guard !state.finished else { return true }
            state.nextID += 1
            let id = state.nextID
            state.subscribers[id] = continuation
            continuation.onTermination = { [weak self] _ in
                // Not here: a cancelled subscriber's task runs this holding its own status lock, while `publish`
                // holds our lock and yields, which takes that task's lock (a deadlock seen in CI). Yielding to an
                // ended subscription does nothing, so it can leave the table a moment later.
                guard let self else { return }
                DispatchQueue.global().async { self.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
            }
            return false
        }
        if ended { continuation.finish() }
        return stream
    }
}
