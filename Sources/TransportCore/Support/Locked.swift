import Glibc

/// A value behind a pthread mutex: the lock for state shared between an event loop and callers' threads, in every
/// layer (the core's `DatagramQueue` included).
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes, and the project's
/// concurrency changes are checked with `--sanitize=thread`.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable invariant: `value` is only read or written between lock and unlock of `mutex`.
    /// Allocated, not a stored `pthread_mutex_t`: `&storedProperty` is a Swift access of the property itself (made
    /// before the lock is held, so ThreadSanitizer reports every contended lock as a race) and its address is not
    /// guaranteed to be stable.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
