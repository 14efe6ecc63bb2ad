import Testing
import TransportCore
import TransportIO

/// A stopped loop refuses work instead of leaving its callers waiting forever.
@Suite("Event loop stop")
struct EventLoopStopTests {
    @Test func submitThrowsOnceTheLoopStopped() async throws {
        let loop = try EventLoop(name: "stop-test")
        #expect(try await loop.submit { 42 } == 42)
        loop.shutdown()
        let error = await #expect(throws: TransportError.self) { try await loop.submit { 1 } }
        #expect(error?.code == .cancelled)
    }
}
