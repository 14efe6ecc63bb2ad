import Testing

@testable import TransportCore

@Suite("Per-relay budget of keys in the shared anti-replay store")
struct ZeroRTTBudgetTests {
    @Test func grantsAtMostCapacityPerWindow() {
        var budget = ZeroRTTBudget(capacity: 3, windowMilliseconds: 1000)
        #expect(budget.take(now: 0) && budget.take(now: 10) && budget.take(now: 20))
        #expect(!budget.take(now: 500), "a fourth grant within the window")
        #expect(budget.used == 3)
        #expect(budget.take(now: 1000), "the first grant left the window")
        #expect(!budget.take(now: 1005))
        #expect(budget.take(now: 1020) && budget.used == 2, "two grants left, one taken")
    }

    /// A flood of attempts never makes the budget hold more than `capacity` entries.
    @Test func memoryStaysBoundedUnderAFlood() {
        var budget = ZeroRTTBudget(capacity: 100, windowMilliseconds: 60_000)
        var granted = 0
        for now in 0..<100_000 where budget.take(now: Int64(now)) { granted += 1 }
        #expect(granted == 100 * 2)  // two windows within 100 s
        #expect(budget.used <= 100)
    }
}
