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

    @Test func aPoppedFrameComesBackInFrontOrIsCountedWhenItCannot() throws {
        let queue = DatagramQueue(capacity: 2)
        queue.ready(maxPayload: 100)
        #expect(queue.popFresh(now: 0) == nil)
        _ = try queue.offer([1], deadline: 10, wake: false)
        _ = try queue.offer([2], deadline: 1_000, wake: false)
        _ = try queue.offer([3], deadline: 1_000, wake: false)  // full: [1] is pushed out
        #expect(queue.expired == 1)
        // Taken out: no longer waiting, not seen by `drop`.
        let first = try #require(queue.popFresh(now: 20))
        #expect(first.entry.payload == [2] && first.more && queue.count == 1)
        #expect(queue.drop { $0 == [2] } == 0)
        // Not taken by the transport: back in front, in order.
        queue.restoreFirst(first.entry)
        #expect(queue.count == 2)
        #expect(queue.takeFresh(now: 0).map(\.payload) == [[2], [3]])
        // Stale frames on the way are dropped and counted; the last fresh one says nothing waits behind it.
        _ = try queue.offer([4], deadline: 10, wake: false)
        _ = try queue.offer([5], deadline: 1_000, wake: false)
        let fresh = try #require(queue.popFresh(now: 20))
        #expect(fresh.entry.payload == [5] && !fresh.more && queue.isEmpty && queue.expired == 2)
        // The queue filled up behind it: it is the oldest, so it goes (counted) instead of going over capacity.
        _ = try queue.offer([6], deadline: 1_000, wake: false)
        _ = try queue.offer([7], deadline: 1_000, wake: false)
        queue.restoreFirst(fresh.entry)
        #expect(queue.count == 2 && queue.expired == 3)
        // Closed meanwhile: dropped and counted too.
        let next = try #require(queue.popFresh(now: 20))
        queue.fail(TransportError(.cancelled, "closed"))
        queue.restoreFirst(next.entry)
        #expect(queue.isEmpty && queue.expired == 5)
    }
}
