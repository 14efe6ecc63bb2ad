import Testing

@testable import TransportIO

/// The loop's timer queue, sans-IO on virtual deadlines: earliest first, a re-armed timer fires once at its last
/// deadline, an installed handler survives firing and disarming but not cancelling, and a one-shot action given
/// with a deadline takes the timer's next firing only.
@Suite("Timer queue")
struct TimerQueueTests {
    /// Issue 31, item 11: a connection re-arms its idle deadline at every packet; each re-arm left a stale entry
    /// until its deadline passed (a TCP peer grew one loop's heap by 2 MB). Stale entries are dropped once they
    /// outnumber the live timers, and the deadlines still fire in order, each once.
    @Test func reArmingAtEveryPacketKeepsTheHeapSmall() {
        var queue = TimerQueue()
        var fired: [Int] = []
        for id in 0..<10 { queue.setHandler(id: id) { fired.append(id) } }
        for round in 0..<100_000 { queue.arm(id: round % 10, at: 1_000_000 + UInt64(round)) }
        #expect(queue.entryCount <= 2 * 10 + 64, "\(queue.entryCount) entries for 10 timers")
        for action in queue.popDue(now: .max) { action() }
        #expect(fired == Array(0..<10), "each timer once, at its last deadline, earliest first")
        #expect(queue.isEmpty)
    }

    @Test func timersFireEarliestFirstAndOnceAtTheirLastDeadline() {
        var queue = TimerQueue()
        var fired: [String] = []
        queue.schedule(id: 1, at: 30) { fired.append("a") }
        queue.schedule(id: 2, at: 10) { fired.append("b") }
        queue.schedule(id: 1, at: 20) { fired.append("a2") }  // replaces id 1's deadline and action
        #expect(queue.nextDeadline() == 10)
        for action in queue.popDue(now: 25) { action() }
        #expect(fired == ["b", "a2"])
        #expect(queue.popDue(now: 100).isEmpty, "the replaced entry at 30 is stale")
        #expect(queue.isEmpty)
    }

    @Test func anInstalledHandlerFiresAtEachArmUntilCancelled() {
        var queue = TimerQueue()
        var count = 0
        queue.setHandler(id: 7) { count += 1 }
        queue.arm(id: 7, at: 10)
        queue.arm(id: 7, at: 15)  // moved later: fires once, at 15
        #expect(queue.popDue(now: 12).isEmpty)
        for action in queue.popDue(now: 15) { action() }
        #expect(count == 1)
        queue.arm(id: 7, at: 20)
        queue.disarm(id: 7)
        #expect(queue.popDue(now: 50).isEmpty, "disarmed")
        queue.arm(id: 7, at: 60)
        for action in queue.popDue(now: 60) { action() }
        #expect(count == 2, "the handler survived firing and disarming")
        queue.cancel(id: 7)
        queue.arm(id: 7, at: 70)
        #expect(queue.popDue(now: 80).isEmpty, "cancelled: no handler any more")
    }

    @Test func aOneShotActionTakesOnlyTheNextFiring() {
        var queue = TimerQueue()
        var fired: [String] = []
        queue.setHandler(id: 3) { fired.append("handler") }
        queue.schedule(id: 3, at: 10) { fired.append("once") }
        for action in queue.popDue(now: 10) { action() }
        queue.arm(id: 3, at: 20)
        for action in queue.popDue(now: 20) { action() }
        queue.schedule(id: 3, at: 30) { fired.append("dropped") }
        queue.arm(id: 3, at: 40)  // arming replaces the one-shot action too
        for action in queue.popDue(now: 40) { action() }
        #expect(fired == ["once", "handler", "handler"])
    }
}
