import Foundation
import Testing

@testable import TransportIO

/// A relay loop's heap reservation (`HeapReserve`): what it reports, its bounds, and that the thread allocates into
/// the reserved room normally afterwards. Each case runs on a thread of its own, as a loop does.
@Suite("Heap reservation of a relay loop's thread")
struct HeapReserveTests {
    /// Runs `body` on a new thread and returns its result.
    private func onNewThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.start()
        }
    }

    @Test func reservesWholeChunksUpToTheBound() async {
        let reported = await onNewThread {
            [
                HeapReserve.onThisThread(bytes: 8 << 20), HeapReserve.onThisThread(bytes: 100_000),
                HeapReserve.onThisThread(bytes: 1 << 30),
            ]
        }
        #expect(reported[0] == 8 << 20)
        #expect(reported[1] == 64 * 1024)  // whole 64 KiB chunks only
        #expect(reported[2] == 64 << 20)  // never past one arena heap's worth
    }

    @Test func nothingAndNegativeReserveNothing() async {
        let reported = await onNewThread { [HeapReserve.onThisThread(bytes: 0), HeapReserve.onThisThread(bytes: -5)] }
        #expect(reported == [0, 0])
    }

    @Test func theThreadAllocatesIntoTheReservedRoom() async {
        let intact = await onNewThread { () -> Bool in
            HeapReserve.onThisThread()
            // About 500 connections' worth of state, written and read back.
            var blocks: [UnsafeMutablePointer<UInt8>] = []
            for index in 0..<500 {
                let block = UnsafeMutablePointer<UInt8>.allocate(capacity: 91 * 1024)
                block.initialize(repeating: UInt8(truncatingIfNeeded: index), count: 91 * 1024)
                blocks.append(block)
            }
            defer { for block in blocks { block.deallocate() } }
            return blocks.enumerated().allSatisfy { index, block in
                block[0] == UInt8(truncatingIfNeeded: index) && block[91 * 1024 - 1] == UInt8(truncatingIfNeeded: index)
            }
        }
        #expect(intact)
    }
}
