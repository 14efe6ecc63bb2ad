/// Deadlines on the event loop: a binary min-heap with lazy cancellation. Each timer has an identity that can be
/// rescheduled cheaply (one per connection), so stale heap entries are skipped instead of searched for.
struct TimerQueue {
    private struct Entry {
        var deadline: UInt64
        var id: Int
        var generation: UInt64
    }
    private var heap: [Entry] = []
    private var live: [Int: (generation: UInt64, action: () -> Void)] = [:]
    private var generation: UInt64 = 0

    /// Sets timer `id` to fire `action` at `deadline`, replacing any earlier schedule of the same id.
    mutating func schedule(id: Int, at deadline: UInt64, _ action: @escaping () -> Void) {
        generation &+= 1
        live[id] = (generation, action)
        push(Entry(deadline: deadline, id: id, generation: generation))
    }

    mutating func cancel(id: Int) { live[id] = nil }

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
            if let entry = live.removeValue(forKey: top.id) { due.append(entry.action) }
        }
    }

    var isEmpty: Bool { live.isEmpty }

    private mutating func dropStale() {
        while let top = heap.first, live[top.id]?.generation != top.generation { pop() }
    }

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
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
