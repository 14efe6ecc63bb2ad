/// Where a relay counts the grants of its 0-RTT budget (`ZeroRTTBudget`: at most `capacity` within any window): in
/// this process, or in memory that the worker processes of one relay share (`serve --workers N`, TransportIO's
/// `RelayWideState`), so that the budget is the relay's, not each worker's. The anti-replay stores take one grant
/// where their budget says (the in-process store per ticket it records, the fleet's store per key it may create).
///
/// `now` is in milliseconds on whatever clock the caller's budget uses; every holder of one counter uses the same.
package protocol ZeroRTTGrantCounter: AnyObject, Sendable {
    /// The most grants within one window.
    var capacity: Int { get }
    /// Takes a grant at `now`: false when `capacity` grants were taken within the last window.
    func take(now: Int64) -> Bool
    /// Gives back the latest grant, taken for a claim that created nothing (a replay, a store that lost its memory
    /// or failed): only claims that could succeed spend the budget.
    func giveBack()
    /// Grants counted at `now`.
    func used(now: Int64) -> Int
}

/// Makes the counter of a budget of `capacity` grants per window of `windowMilliseconds` (a store knows its window;
/// the relay knows where its grants are counted).
package typealias ZeroRTTGrantCounterMaker =
    @Sendable (_ capacity: Int, _ windowMilliseconds: Int64) -> any ZeroRTTGrantCounter

/// A `ZeroRTTBudget` of this process only, behind a lock (the loops of one server share it).
package final class LocalZeroRTTGrants: ZeroRTTGrantCounter {
    private let budget: Locked<ZeroRTTBudget>
    package let capacity: Int

    package init(capacity: Int, windowMilliseconds: Int64) {
        let budget = ZeroRTTBudget(capacity: capacity, windowMilliseconds: windowMilliseconds)
        self.capacity = budget.capacity
        self.budget = Locked(budget)
    }

    package func take(now: Int64) -> Bool { budget.withLock { $0.take(now: now) } }

    package func giveBack() { budget.withLock { $0.refund() } }

    package func used(now: Int64) -> Int { budget.withLock { $0.used(now: now) } }
}
