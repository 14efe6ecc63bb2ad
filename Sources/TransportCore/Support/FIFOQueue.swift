/// A first-in first-out queue with O(1) `append` and `popFirst`: the storage behind the event queues of the
/// connections and the application-side inboxes. A taken element's slot is cleared at once (so a large payload
/// is released when it is read, not when the queue next compacts), and the storage is compacted when drained, or
/// once more than half of it (and at least 64 slots) has been read.
package struct FIFOQueue<Element> {
    private var slots: [Element?] = []
    private var head = 0
    /// `slots.count - head`, stored: asking an empty queue for its next element (a connection's events, once per
    /// pass) reads this value only, not the storage's header, which with a thousand connections is a cache miss.
    private var waiting = 0

    package init() {}

    /// Elements not yet taken.
    package var count: Int { waiting }

    /// Whether every element was taken.
    package var isEmpty: Bool { waiting == 0 }

    /// The front element, left in place; nil when empty.
    package var first: Element? { waiting > 0 ? slots[head] : nil }

    /// Adds `element` at the back.
    package mutating func append(_ element: Element) {
        slots.append(element)
        waiting += 1
    }

    /// Runs `body` on the back element in place (no copy of what it holds); nil when the queue is empty.
    package mutating func withLast<Result>(_ body: (inout Element) -> Result) -> Result? {
        guard waiting > 0 else { return nil }
        let index = slots.count - 1
        guard var last = slots[index] else { return nil }
        slots[index] = nil  // the element's storage is then uniquely referenced by `last`: no copy on write
        let result = body(&last)
        slots[index] = last
        return result
    }

    /// Calls `body` on each element not yet taken, front to back, in place.
    package mutating func updateEach(_ body: (inout Element) -> Void) {
        for index in head..<slots.count {
            guard var element = slots[index] else { continue }
            slots[index] = nil  // uniquely referenced by `element` while `body` runs: no copy on write
            body(&element)
            slots[index] = element
        }
    }

    /// Calls `body` on each element not yet taken, front to back.
    package func visit(_ body: (Element) -> Void) {
        for index in head..<slots.count { if let element = slots[index] { body(element) } }
    }

    /// Takes the back element (the one appended last); nil when empty.
    package mutating func popLast() -> Element? {
        guard waiting > 0 else { return nil }
        waiting -= 1
        let element = slots.removeLast()
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        }
        return element
    }

    /// Takes the front element; nil when empty.
    package mutating func popFirst() -> Element? {
        guard waiting > 0 else { return nil }
        waiting -= 1
        let element = slots[head]
        slots[head] = nil
        head += 1
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return element
    }
}
