import Glibc

/// A value behind a pthread mutex: the lock for state shared between an event loop and callers' threads, in every
/// layer (the core's `DatagramQueue` included).
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes, and the project's
/// concurrency changes are checked with `--sanitize=thread`.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable invariant: `value` is only read or written while `mutex` is held.
    private let mutex = PThreadMutex()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        try mutex.withLock { () throws(E) -> Result in try body(&value) }
    }
}

/// A pthread mutex on an allocation of its own, for code that guards state it does not hold (a `Locked` holds
/// its value). Allocated, not a stored `pthread_mutex_t`: `&storedProperty` is a Swift access of the property,
/// made before the lock is held, and ThreadSanitizer reports every contended lock as a race on it.
package final class PThreadMutex: @unchecked Sendable {
    // @unchecked Sendable invariant: the mutex is only touched through pthread calls, which synchronize.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    package init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held.
    package func withLock<Result, E: Error>(_ body: () throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
