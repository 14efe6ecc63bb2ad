import Testing

@testable import PTTBench

@Suite("capacity-fanout decision (pure)")
struct FanoutLadderTests {
    static func step(
        _ listeners: Int, delivered: Int? = nil, frames: Int = 100, p99: Double? = 1
    )
        -> FanoutLadder.Step
    {
        FanoutLadder.Step(
            listeners: listeners, framesSent: frames, delivered: delivered ?? listeners * frames,
            p50Milliseconds: p99, p99Milliseconds: p99)
    }

    @Test func lossIsMissingDeliveriesOverExpected() {
        #expect(Self.step(10, delivered: 990).lossPercent == 1)
        #expect(Self.step(10).lossPercent == 0)
        #expect(Self.step(10, delivered: 0, frames: 0).lossPercent == 100, "nothing expected counts as lost")
        #expect(Self.step(4, delivered: 500).lossPercent == 0, "more deliveries than expected is never negative loss")
    }

    @Test func criteriaAreStrictOnBothBounds() {
        let criteria = FanoutLadder.Criteria()
        #expect(criteria.passes(Self.step(10, delivered: 991, p99: 4.99)))
        #expect(!criteria.passes(Self.step(10, delivered: 990, p99: 1)), "1 % loss fails")
        #expect(!criteria.passes(Self.step(10, p99: 5)), "p99 of exactly 5 ms fails")
        #expect(!criteria.passes(Self.step(10, p99: nil)), "no latency sample fails")
    }

    @Test func oneSlowStepDoesNotEndTheClimbButTwoInARowDo() {
        var ladder = FanoutLadder(counts: [10, 20, 30, 40, 50, 60])
        #expect(ladder.next == 10)
        ladder.record(Self.step(10))
        ladder.record(Self.step(20, p99: 7))  // an idle-machine latency tail
        #expect(ladder.next == 30, "one failing step: climb on")
        ladder.record(Self.step(30))
        ladder.record(Self.step(40, p99: 6))
        #expect(ladder.next == 50)
        ladder.record(Self.step(50, p99: 8))
        #expect(ladder.next == nil, "two failing steps in a row end the climb")
        #expect(ladder.maxSustained == 30)
        #expect(ladder.lastPassing?.listeners == 30)
        #expect(ladder.firstFailing?.listeners == 40, "the first failure above the largest pass")
    }

    @Test func lossOfOnePercentEndsTheClimbAtOnce() {
        var ladder = FanoutLadder(counts: [10, 20, 30])
        ladder.record(Self.step(10))
        ladder.record(Self.step(20, delivered: 1900))
        #expect(ladder.next == nil, "a saturated relay loses frames: more listeners cannot pass")
        #expect(ladder.maxSustained == 10 && ladder.firstFailing?.listeners == 20)
    }

    @Test func firstStepFailingSustainsNothing() {
        var ladder = FanoutLadder(counts: [10, 20])
        ladder.record(Self.step(10, delivered: 0))
        #expect(ladder.next == nil, "total loss ends the climb")
        #expect(ladder.maxSustained == 0 && ladder.lastPassing == nil)
        #expect(ladder.firstFailing?.listeners == 10)
    }

    @Test func ladderEndsWhenEveryStepPassed() {
        var ladder = FanoutLadder(counts: [10, 20])
        ladder.record(Self.step(10))
        ladder.record(Self.step(20))
        #expect(ladder.next == nil && ladder.maxSustained == 20 && ladder.firstFailing == nil)
    }

    @Test func frameRoundTripsSequenceAndSendTime() {
        let frame = FanoutFrame(sequence: 0x0102_0304, sentAt: 0x1122_3344_5566_7788)
        #expect(frame.bytes.count == 80)
        #expect(Array(frame.bytes.prefix(12)) == [1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])
        #expect(FanoutFrame(frame.bytes) == frame)
        #expect(FanoutFrame([UInt8](repeating: 0, count: 79)) == nil)
    }
}
