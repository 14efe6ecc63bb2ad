/// Deadlines on the event loop: a binary min-heap with lazy cancellation. Each timer has an identity that can be
/// rescheduled cheaply (one per connection), so stale heap entries are skipped instead of searched for. A timer
/// re-armed at every packet (an idle deadline seconds away) would leave a stale entry each time, so once stale
/// entries outnumber the live timers the heap is rebuilt from the live ones: at most about twice as many entries
/// as armed timers, whatever the peers make the connections do (one peer's traffic grew it by 2 MB).
///
/// A timer fires either a one-shot action given with its deadline (`schedule`), or, without one, the handler
/// installed once for its identity (`setHandler`, then `arm` per deadline: no closure per deadline).
struct TimerQueue {
    private struct Entry {
        var deadline: UInt64
        var id: Int
        var generation: UInt64
    }
    private var heap: [Entry] = []
    /// The generation of each armed timer's current entry.
    private var live: [Int: UInt64] = [:]
    /// One-shot actions: taken when their timer fires or is cancelled.
    private var actions: [Int: () -> Void] = [:]
    /// Installed handlers: kept until `cancel`.
    private var handlers: [Int: () -> Void] = [:]
    private var generation: UInt64 = 0

    /// Sets timer `id` to fire `action` at `deadline`, replacing any earlier schedule of the same id.
    mutating func schedule(id: Int, at deadline: UInt64, _ action: @escaping () -> Void) {
        actions[id] = action
        push(id: id, at: deadline)
    }

    /// Installs what timer `id` runs when armed with `arm` (until `cancel`).
    mutating func setHandler(id: Int, _ handler: @escaping () -> Void) { handlers[id] = handler }

    /// Sets timer `id` to fire its installed handler at `deadline`, replacing an earlier deadline (and a one-shot
    /// action scheduled for it).
    mutating func arm(id: Int, at deadline: UInt64) {
        actions[id] = nil
        push(id: id, at: deadline)
    }

    /// Disarms timer `id` (its installed handler stays for the next `arm`).
    mutating func disarm(id: Int) {
        live[id] = nil
        actions[id] = nil
    }

    /// Disarms timer `id` and forgets its action and handler.
    mutating func cancel(id: Int) {
        live[id] = nil
        actions[id] = nil
        handlers[id] = nil
    }

    /// The earliest live deadline.
    mutating func nextDeadline() -> UInt64? {
        dropStale()
        return heap.first?.deadline
    }

    /// Removes and returns the actions due at `now`, earliest first.
    mutating func popDue(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while true {
            dropStale()
            guard let top = heap.first, top.deadline <= now else { return due }
            pop()
            live[top.id] = nil
            if let action = actions.removeValue(forKey: top.id) ?? handlers[top.id] { due.append(action) }
        }
    }

    var isEmpty: Bool { live.isEmpty }

    /// Heap entries, stale ones included (for tests of the compaction).
    var entryCount: Int { heap.count }

    private mutating func push(id: Int, at deadline: UInt64) {
        if heap.count >= 2 * live.count + 64 { compact() }
        generation &+= 1
        live[id] = generation
        let entry = Entry(deadline: deadline, id: id, generation: generation)
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Keeps only the live entries, in heap order again (O(n), once per `live.count + 64` pushes at most).
    private mutating func compact() {
        heap.removeAll { live[$0.id] != $0.generation }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
    }

    private mutating func dropStale() {
        while let top = heap.first, live[top.id] != top.generation { pop() }
    }

    private mutating func pop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(from: 0)
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
