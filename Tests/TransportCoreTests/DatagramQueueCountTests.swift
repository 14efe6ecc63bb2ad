import Testing
import TransportCore

/// The queue's published count (read without its lock by `peekFresh`, `isEmpty` and `count`) follows every change:
/// offers, sends, expiry, overflow and closing.
@Suite("DatagramQueue count without the lock")
struct DatagramQueueCountTests {
    @Test func theCountFollowsOffersTakesExpiryAndClosing() throws {
        let queue = DatagramQueue(capacity: 3)
        #expect(queue.isEmpty && queue.count == 0)
        #expect(queue.peekFresh(now: 0) == nil)
        queue.ready(maxPayload: 100)
        _ = try queue.offer([1], deadline: 10, wake: false)
        _ = try queue.offer([2], deadline: 1_000, wake: false)
        #expect(queue.count == 2 && !queue.isEmpty)
        // The first expired at 20: dropped on the way, the second is fresh.
        let fresh = try #require(queue.peekFresh(now: 20))
        #expect(fresh.entry.payload == [2] && !fresh.more)
        #expect(queue.count == 1 && queue.expired == 1)
        queue.removeFirst()
        #expect(queue.isEmpty && queue.peekFresh(now: 20) == nil)
        // Overflow: the oldest goes, the count stays at the capacity.
        for byte in UInt8(1)...4 { _ = try queue.offer([byte], deadline: 1_000, wake: false) }
        #expect(queue.count == 3 && queue.expired == 2)
        #expect(queue.takeFresh(now: 0).map(\.payload) == [[2], [3], [4]])
        #expect(queue.isEmpty)
        _ = try queue.offer([5], deadline: 1_000, wake: false)
        queue.fail(TransportError(.cancelled, "closed"))
        #expect(queue.isEmpty && queue.peekFresh(now: 0) == nil && queue.expired == 3)
        #expect(throws: TransportError.self) { try queue.offer([6], deadline: 1_000, wake: false) }
        #expect(queue.isEmpty)
    }

    @Test func aFrameOfferedOnAnotherThreadIsSeenAfterTheWake() async throws {
        let queue = DatagramQueue(capacity: 8)
        queue.ready(maxPayload: 100)
        let wake = try await Task.detached { try queue.offer([7], deadline: .max, wake: true) }.value
        #expect(wake)
        queue.woken()
        #expect(queue.peekFresh(now: 0)?.entry.payload == [7])
    }
}
