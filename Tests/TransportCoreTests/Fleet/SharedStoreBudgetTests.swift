import Testing

@testable import TransportCore

@Suite("Per-relay budget of keys in the shared anti-replay store")
struct SharedStoreBudgetTests {
    @Test func grantsAtMostCapacityPerWindow() {
        var budget = ZeroRTTBudget(capacity: 3, windowMilliseconds: 1000)
        let grants = [0, 10, 20, 500, 1000, 1005, 1020].map { budget.take(now: Int64($0)) }
        // Three within the first window; the fourth waits until the first grant leaves it (at 1000); at 1020 the
        // grants of 10 and 20 have left too.
        #expect(grants == [true, true, true, false, true, false, true])
        #expect(budget.used == 2)
    }

    /// What `used(now:)` reports leaves with its window even when nobody takes a grant (a quiet relay's metrics and
    /// its workers' view of the relay-wide budget do not keep a flood's grants for ever).
    @Test func grantsLeaveTheCountWithTheirWindowWithoutANewTake() {
        var budget = ZeroRTTBudget(capacity: 3, windowMilliseconds: 1000)
        #expect(budget.take(now: 0) && budget.take(now: 400))
        #expect(budget.used(now: 999) == 2)
        #expect(budget.used(now: 1000) == 1)
        #expect(budget.used(now: 1400) == 0)
        let local = LocalZeroRTTGrants(capacity: 3, windowMilliseconds: 1000)
        #expect(local.take(now: 0))
        #expect(local.used(now: 10) == 1 && local.used(now: 1000) == 0)
    }

    /// A flood of attempts never makes the budget hold more than `capacity` entries.
    @Test func memoryStaysBoundedUnderAFlood() {
        var budget = ZeroRTTBudget(capacity: 100, windowMilliseconds: 60_000)
        var granted = 0
        var most = 0
        for now in 0..<100_000 {
            if budget.take(now: Int64(now)) { granted += 1 }
            most = max(most, budget.used)
        }
        #expect(granted == 100 * 2, "100 per 60 s window over 100 s")
        #expect(most == 100)
    }
}
