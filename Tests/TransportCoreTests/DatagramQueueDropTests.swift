import Testing
import TransportCore

/// Dropping queued frames that lost their worth before they left (a pre-empted talker's audio still queued for a
/// listener): the picked frames go and are counted, the others keep their order, the count follows.
@Suite("DatagramQueue: dropping a pre-empted burst's frames")
struct DatagramQueueDropTests {
    @Test func thePickedFramesGoCountedAndTheRestKeepTheirOrder() throws {
        let queue = DatagramQueue(capacity: 16)
        queue.ready(maxPayload: 100)
        // Bursts 1 and 2 interleaved (a replay of 1 and live audio of 2, say).
        for (burst, sequence) in [(1, 0), (2, 0), (1, 1), (2, 1), (1, 2)] as [(UInt8, UInt8)] {
            _ = try queue.offer([burst, sequence], deadline: 1_000, wake: false)
        }
        #expect(queue.drop { $0.first == 1 } == 3)
        #expect(queue.count == 2 && queue.expired == 3)
        #expect(queue.takeFresh(now: 0).map(\.payload) == [[2, 0], [2, 1]])
        #expect(queue.drop { _ in true } == 0, "nothing waits: nothing to drop")
        #expect(queue.isEmpty && queue.expired == 3)
    }

    @Test func droppingAfterAPartialSendKeepsTheQueueUsable() throws {
        let queue = DatagramQueue(capacity: 4)
        queue.ready(maxPayload: 100)
        for byte in UInt8(1)...4 { _ = try queue.offer([byte], deadline: 1_000, wake: false) }
        _ = try #require(queue.peekFresh(now: 0))
        queue.removeFirst()  // [1] left
        #expect(queue.drop { $0 == [3] } == 1)
        #expect(queue.peekFresh(now: 0)?.entry.payload == [2])
        // At capacity again, the oldest still goes first.
        for byte in UInt8(5)...7 { _ = try queue.offer([byte], deadline: 1_000, wake: false) }
        #expect(queue.takeFresh(now: 0).map(\.payload) == [[4], [5], [6], [7]])
    }
}
