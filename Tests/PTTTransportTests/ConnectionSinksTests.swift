import Testing
import TransportCore

@testable import PTTTransport

/// The per-stream state a connection's sinks keep ends with the stream (issue 21, item 14).
@Suite("Connection sinks forget closed streams")
struct ConnectionSinksTests {
    @Test func aStopSendingCodeIsKeptUntilTheStreamCloses() {
        let sinks = ConnectionSinks(datagramReceiveBuffer: 4)
        for id in stride(from: Int64(0), to: 400, by: 4) {
            sinks.openStream(id, peerOpened: true)
            sinks.peerStopSending(id, code: 7)
            #expect(sinks.writeRefusal(id)?.code == .streamStopped, "writes fail with the peer's code meanwhile")
            sinks.streamClosed(id)
        }
        #expect(sinks.trackedStreams == 0, "an entry per stopped stream outlived the stream")
        sinks.finish(.local(code: 0, reason: ""))
    }
}
