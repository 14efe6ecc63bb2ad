import TransportCore
import TransportIO

/// A FIFO from the event loop to any number of readers, each element taken once; optionally bounded, keeping the
/// newest. Cancelling a waiting reader ends only that wait: the mailbox keeps its elements for the next reader
/// (unlike `AsyncStream`, which terminates when a waiting iterator's task is cancelled).
package final class Mailbox<Element: Sendable>: Sendable {
    private struct State: ChangeWatched {
        var elements = FIFOQueue<Element>()
        var finished = false
        var changeWaiters = ChangeWaiters()
    }

    private let state = Locked(State())
    /// The most elements held; beyond it the oldest is dropped.
    private let capacity: Int

    package init(capacity: Int = .max) { self.capacity = max(1, capacity) }

    /// Loop side: adds an element (ignored after `finish`). Returns false when the mailbox was full and its
    /// oldest element was dropped to make room.
    @discardableResult
    package func send(_ element: Element) -> Bool {
        state.changeAndWake { state in
            guard !state.finished else { return true }
            let full = state.elements.count >= capacity
            if full { _ = state.elements.popFirst() }
            state.elements.append(element)
            return !full
        }
    }

    /// Takes every element waiting now, oldest first (the caller hands them elsewhere).
    package func takeAll() -> [Element] {
        state.withLock { state in
            var taken: [Element] = []
            while let element = state.elements.popFirst() { taken.append(element) }
            return taken
        }
    }

    /// Loop side: no more elements; readers get the ones already sent, then nil.
    package func finish() {
        state.changeAndWake { $0.finished = true }
    }

    /// The next element; nil once finished and empty, or when the task is cancelled while waiting.
    package func next() async -> Element? {
        while true {
            let (element, finished, generation) = state.withLock { state in
                (state.elements.popFirst(), state.finished, state.changeWaiters.generation)
            }
            if let element { return element }
            if finished || Task.isCancelled { return nil }
            await state.waitForChange(after: generation)
        }
    }
}
