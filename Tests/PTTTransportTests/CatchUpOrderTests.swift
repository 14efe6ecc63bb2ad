import Testing

@testable import PTTTalkGroups

/// The phone's order for a burst it catches up, on a virtual clock: a live frame that overtakes the replay waits
/// for it, the replay's copy of a frame handed on is dropped, and a lost replay frame stalls nothing for long.
@Suite("Catch-up order (sans-IO)")
struct CatchUpOrderTests {
    private static let ms: UInt64 = 1_000_000

    @Test func aLiveFrameThatOvertookTheReplayWaitsForItAndComesOnce() {
        var order = CatchUpOrder<UInt32>()
        order.begin(burst: 7, from: 0)
        var heard: [UInt32] = []
        heard += order.accept(40, burst: 7, sequence: 40, now: 0)  // live, before the replay started
        #expect(heard.isEmpty)
        for sequence in UInt32(0)...40 {
            heard += order.accept(sequence, burst: 7, sequence: sequence, now: 1 * Self.ms)
        }
        for sequence in UInt32(41)..<100 {
            heard += order.accept(sequence, burst: 7, sequence: sequence, now: 2 * Self.ms)
        }
        #expect(heard == Array(0..<100), "every frame once, in order, across the seam")
    }

    @Test func aLostReplayFrameStallsAtMostThePatience() {
        var order = CatchUpOrder<UInt32>(capacity: 256, patience: 300 * Self.ms)
        order.begin(burst: 1, from: 0)
        var heard = order.accept(0, burst: 1, sequence: 0, now: 0)
        heard += order.accept(2, burst: 1, sequence: 2, now: 10 * Self.ms)  // 1 was lost
        #expect(heard == [0])
        heard += order.accept(3, burst: 1, sequence: 3, now: 200 * Self.ms)
        #expect(heard == [0], "still within the patience")
        heard += order.accept(4, burst: 1, sequence: 4, now: 311 * Self.ms)
        #expect(heard == [0, 2, 3, 4], "the gap given up, the rest in order")
        heard += order.accept(1, burst: 1, sequence: 1, now: 320 * Self.ms)
        #expect(heard == [0, 2, 3, 4], "a frame older than what was handed on is dropped")
    }

    @Test func otherBurstsPassAndEndTheCatchUp() {
        var order = CatchUpOrder<String>()
        #expect(order.accept("no catch-up", burst: 3, sequence: 9, now: 0) == ["no catch-up"])
        order.begin(burst: 3, from: 0)
        #expect(order.accept("ahead", burst: 3, sequence: 5, now: 0).isEmpty)
        #expect(order.accept("new", burst: 4, sequence: 0, now: 1) == ["ahead", "new"])
        #expect(order.accept("late", burst: 3, sequence: 1, now: 2) == ["late"], "no catch-up runs any more")
    }

    @Test func theWaitingLineIsBounded() {
        var order = CatchUpOrder<UInt32>(capacity: 4, patience: .max)
        order.begin(burst: 1, from: 0)
        var heard: [UInt32] = []
        for sequence in UInt32(10)..<15 { heard += order.accept(sequence, burst: 1, sequence: sequence, now: 0) }
        #expect(heard == [10, 11, 12, 13, 14], "a fifth frame waiting releases them in order")
    }
}
