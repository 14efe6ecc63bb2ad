import Testing
import TransportCore
import TransportIO

/// Deferred work, closures and objects alike, runs once the loop's current batch is handled, in the order it was
/// deferred, and what it defers runs in the same turn.
@Suite("Event loop deferred work")
struct EventLoopDeferTests {
    /// What ran, in order.
    private final class Log: @unchecked Sendable {
        // @unchecked Sendable invariant: `lines` is touched only on the loop's thread.
        var lines: [String] = []
    }

    private final class Deferred: IdleDeferring, @unchecked Sendable {
        // @unchecked Sendable invariant: created, run and released on the loop's thread.
        let work: () -> Void
        init(_ work: @escaping () -> Void) { self.work = work }
        func runWhenIdle() { work() }
    }

    @Test func objectsAndClosuresRunInTheOrderDeferredOnceTheJobEnded() async throws {
        let loop = try EventLoop(name: "defer-test")
        defer { loop.shutdown() }
        let log = Log()
        let inJob = try await loop.submit { () -> [String] in
            loop.deferUntilIdle { log.lines.append("closure 1") }
            loop.deferUntilIdle(Deferred { log.lines.append("object 1") })
            loop.deferUntilIdle { log.lines.append("closure 2") }
            loop.deferUntilIdle(
                Deferred {
                    log.lines.append("object 2")
                    loop.deferUntilIdle(Deferred { log.lines.append("object deferred by object 2") })
                })
            log.lines.append("job")
            return log.lines
        }
        #expect(inJob == ["job"])
        // A job submitted now may still run in the same batch as the first one: ask until the turn ended.
        var after: [String] = []
        for _ in 0..<1_000 {
            after = try await loop.submit { log.lines }
            if after.count > 1 { break }
        }
        #expect(
            after == ["job", "closure 1", "object 1", "closure 2", "object 2", "object deferred by object 2"])
    }
}
