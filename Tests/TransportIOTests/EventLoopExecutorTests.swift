import Testing
import TransportCore
import TransportIO

/// The loop as a task executor: a task that prefers it runs on the loop's thread, stays there across suspensions,
/// and jobs the loop queues for itself run without another thread waking it.
@Suite("Event loop as a task executor")
struct EventLoopExecutorTests {
    @Test func aTaskPreferringTheLoopRunsAndResumesOnItsThread() async throws {
        let loop = try EventLoop(name: "executor-test")
        defer { loop.shutdown() }
        let onLoop = await Task(executorPreference: loop) { () -> [Bool] in
            var seen = [loop.inEventLoop]
            for _ in 0..<100 {
                // Resumed by the loop's own job: queued from the loop thread, so no eventfd write wakes it.
                await withCheckedContinuation { continuation in loop.execute { continuation.resume() } }
                seen.append(loop.inEventLoop)
            }
            _ = try? await loop.submit { 1 }
            seen.append(loop.inEventLoop)
            return seen
        }.value
        #expect(onLoop.count == 102 && onLoop.allSatisfy { $0 }, "every step ran on the loop thread")
        let elsewhere = await Task { loop.inEventLoop }.value
        #expect(!elsewhere, "a task without the preference runs on the global executor")
    }

    /// A job chain the loop feeds itself (each job queues the next) runs to its end, and a job another thread queues
    /// meanwhile still runs: a self-queued job leaves no wake-up pending that would make the loop sleep on it.
    @Test func jobsTheLoopQueuesForItselfAndOthersQueueAllRun() async throws {
        let loop = try EventLoop(name: "self-queue-test")
        defer { loop.shutdown() }
        let count = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            @Sendable func step(_ remaining: Int) {
                if remaining == 0 { return continuation.resume(returning: 1000) }
                loop.execute { step(remaining - 1) }
            }
            loop.execute { step(1000) }
        }
        #expect(count == 1000)
        for _ in 0..<200 {
            let fromHere = try await loop.submit { loop.inEventLoop }
            #expect(fromHere)
            loop.execute { loop.execute {} }  // self-queued jobs interleaved with other threads' work
        }
    }
}
