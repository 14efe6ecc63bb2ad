import TransportCore
import TransportIO

/// The tasks waiting for lock-protected state to change, kept inside that state. A waiter that gets cancelled is
/// simply resumed: cancellation ends the wait, never the state being waited on.
struct ChangeWaiters {
    /// Bumped on every change, so a reader can tell whether anything happened since it last looked.
    private(set) var generation: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextID: UInt64 = 0

    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Records a change; returns the waiters to resume once the lock is released.
    mutating func changed() -> [CheckedContinuation<Void, Never>] {
        generation &+= 1
        defer { waiters.removeAll() }
        return Array(waiters.values)
    }

    /// Parks `continuation` unless something changed after `seen` (then the caller resumes it at once).
    mutating func park(
        _ id: UInt64, _ continuation: CheckedContinuation<Void, Never>, unlessChangedSince seen: UInt64
    )
        -> Bool
    {
        guard generation == seen else { return false }
        waiters[id] = continuation
        return true
    }

    mutating func remove(_ id: UInt64) -> CheckedContinuation<Void, Never>? { waiters.removeValue(forKey: id) }
}

/// Lock-protected state that keeps the tasks waiting for it to change (one `ChangeWaiters` per state).
///
/// A protocol requirement rather than a key path: in a generic type (`Mailbox<Element>`) a key-path literal is
/// instantiated at run time, a metadata lookup and an allocation per mailbox and per access, which a profile of
/// the relay's handshakes showed (two mailboxes per connection).
/// `SendableMetatype`: `waitForChange`'s cancellation handler, a `@Sendable` closure, reaches the state through
/// the generic `Locked`.
protocol ChangeWatched: SendableMetatype {
    var changeWaiters: ChangeWaiters { get set }
}

extension Locked where Value: ChangeWatched {
    /// Suspends until the state's `ChangeWaiters` records a change after `generation`, or until the task is
    /// cancelled (check `Task.isCancelled` afterwards). Never misses a change or a cancellation: both are checked
    /// under the lock that changes and `onCancel` take.
    func waitForChange(after generation: UInt64) async {
        let id = withLock { $0.changeWaiters.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = withLock { value in
                    !Task.isCancelled && value.changeWaiters.park(id, continuation, unlessChangedSince: generation)
                }
                if !parked { continuation.resume() }
            }
        } onCancel: {
            withLock { $0.changeWaiters.remove(id) }?.resume()
        }
    }

    /// Applies `change` and wakes every task waiting on the state's `ChangeWaiters`.
    func changeAndWake<Result>(_ change: (inout Value) -> Result) -> Result {
        let (result, woken) = withLock { value in (change(&value), value.changeWaiters.changed()) }
        for waiter in woken { waiter.resume() }
        return result
    }
}
