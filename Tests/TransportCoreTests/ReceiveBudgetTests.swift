import Testing

@testable import TransportCore

@Suite("Receive windows derived from the largest message")
struct ReceiveBudgetTests {
    @Test func windowsHoldOneLargestMessageAndNeverGrow() {
        let budget = ReceiveBudget(maximumMessageSize: 64 * 1024, streams: 4)
        #expect(budget.streamWindow == 64 * 1024 + 4)  // the message and its 4-byte varint prefix
        #expect(budget.connectionWindow == budget.streamWindow)
        // 9 chunks for the connection window, and 18 KiB for each stream held out of order.
        #expect(budget.pinnableBytes == 9 * 8 * 1024 + 4 * 18 * 1024)
        #expect(budget.pinnableBytes <= 256 * 1024)

        var parameters = QUICParameters()
        parameters.apply(budget)
        #expect(parameters.initialMaxStreamData == budget.streamWindow)
        #expect(parameters.initialMaxData == budget.connectionWindow)
        #expect(parameters.maxBidirectionalStreams == 4)
        let settings = parameters.settings(now: 0)
        #expect(settings.max_window == budget.connectionWindow)
        #expect(settings.max_stream_window == budget.streamWindow)
    }

    @Test func smallMessagesGetSmallWindows() {
        let budget = ReceiveBudget(maximumMessageSize: 1000, streams: 1)
        #expect(budget.streamWindow == 1002)
        #expect(budget.pinnableBytes == 8 * 1024 + 18 * 1024)
    }
}
