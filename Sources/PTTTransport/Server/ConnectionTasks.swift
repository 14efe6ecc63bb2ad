import TransportCore
import TransportIO

/// One task per connection, kept in a table so that a task finishing costs O(1).
///
/// A task group would do the same job, but Swift 6.3's runtime keeps a group's children in a singly linked list
/// and walks it from the oldest child to unlink one that finished: with thousands of long-lived connections in one
/// group, every connection that ends pays for every connection still open (a fuzzed relay with about 3,000 live
/// connections spent 13 % of its CPU in `TaskGroup::removeChildTask`).
final class ConnectionTasks: Sendable {
    private struct Table {
        var nextKey: UInt64 = 0
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var cancelled = false
    }

    private let table = Locked(Table())

    /// Starts `operation` in a task of its own (preferring `executor`, when given); the task leaves the table when
    /// `operation` returns. After `cancelAll()`, a task starts already cancelled.
    func start(on executor: (any TaskExecutor)?, _ operation: @escaping @Sendable () async -> Void) {
        table.withLock { table in
            let key = table.nextKey
            table.nextKey += 1
            // The task cannot remove itself before it is in the table: its removal waits for this lock.
            let task = Task(executorPreference: executor) {
                await operation()
                self.finished(key)
            }
            if table.cancelled { task.cancel() }
            table.tasks[key] = task
        }
    }

    /// Cancels every task in the table, and every task started from now on.
    func cancelAll() {
        let tasks = table.withLock { table in
            table.cancelled = true
            return Array(table.tasks.values)
        }
        for task in tasks { task.cancel() }
    }

    /// Returns once every task started so far (and any started meanwhile) has finished.
    func waitForAll() async {
        while let task = table.withLock({ $0.tasks.first?.value }) {
            await task.value
        }
    }

    private func finished(_ key: UInt64) {
        _ = table.withLock { $0.tasks.removeValue(forKey: key) }
    }
}
