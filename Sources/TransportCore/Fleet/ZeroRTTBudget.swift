/// A sliding-window budget: at most `capacity` grants within any `window`. A relay with a shared anti-replay store
/// takes one grant per key it asks the store to create, so the keys one relay can put in the store at any time are
/// at most `capacity` (each expires within about one window), whatever strangers do. A claim that created no key
/// (the store already held the ticket, or lost its memory and refused) gives its grant back (`refund`): only
/// claims that could succeed spend the budget, so replaying a used ticket costs the relay's honest clients nothing.
///
/// Memory: one `Int64` per grant still in its window. Time: O(1) amortized per call. Sans-IO: the caller passes
/// the time (milliseconds, any monotonic origin). Its whole interface is `take`, `refund` and `used`, so it can
/// live in memory that several processes share.
package struct ZeroRTTBudget {
    package let capacity: Int
    package let window: Int64
    private var deadlines = FIFOQueue<Int64>()  // when each grant leaves the window, oldest first

    package init(capacity: Int, windowMilliseconds: Int64) {
        self.capacity = max(1, capacity)
        self.window = max(1, windowMilliseconds)
    }

    /// Grants counted when last asked (those whose window ended since stay until the next `take` or `used(now:)`).
    package var used: Int { deadlines.count }

    /// Grants still within their window at `now`.
    package mutating func used(now: Int64) -> Int {
        expire(now: now)
        return deadlines.count
    }

    /// Takes a grant at `now`: false when `capacity` grants were taken within the last `window`.
    package mutating func take(now: Int64) -> Bool {
        expire(now: now)
        guard deadlines.count < capacity else { return false }
        deadlines.append(now + window)
        return true
    }

    private mutating func expire(now: Int64) {
        while let oldest = deadlines.first, oldest <= now { _ = deadlines.popFirst() }
    }

    /// Gives back a grant taken for a claim that created nothing. The latest grant leaves (grants taken within a
    /// claim's deadline of each other differ by milliseconds in a window of hours).
    package mutating func refund() { _ = deadlines.popLast() }
}
