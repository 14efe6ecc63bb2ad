import Glibc

/// A value behind a pthread mutex: the lock for state shared between the event loop and callers' threads.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes, and the project's
/// concurrency changes are checked with `--sanitize=thread`.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable invariant: `value` is only read or written between lock and unlock of `mutex`.
    private var mutex = pthread_mutex_t()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body(&value)
    }
}
