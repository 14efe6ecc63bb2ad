import Testing

@testable import TransportCore

@Suite("FIFOQueue")
struct FIFOQueueTests {
    @Test func keepsOrderAcrossCompactionsAndInterleaving() {
        var queue = FIFOQueue<Int>()
        var expected: [Int] = []
        var taken: [Int] = []
        var next = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) {  // more in than out, so the storage compacts while non-empty
                queue.append(next)
                expected.append(next)
                next += 1
            }
            for _ in 0..<(round % 5 + 1) { if let value = queue.popFirst() { taken.append(value) } }
            #expect(queue.count == expected.count - taken.count)
        }
        while let value = queue.popFirst() { taken.append(value) }
        #expect(taken == expected)
        #expect(queue.isEmpty && queue.count == 0 && queue.popFirst() == nil)
    }
}
