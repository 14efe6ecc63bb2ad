import Testing
import TransportCore
import TransportIO

/// Deferred work, closures and objects alike, runs once the loop's current batch is handled, in the order it was
/// deferred, and what it defers runs in the same turn. Work queued with `afterOutput` waits behind the turn's output:
/// it runs after the turn's deferred work and end-of-turn flushes, its own output is flushed after it in the same
/// turn, and work it asks again runs in the next turn, after that turn's jobs and output (how a relay's new
/// connections' handshakes wait behind the packets of the calls it serves, `QUICServerDriver`).
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
        let after = try await Self.lines(of: log, on: loop, atLeast: 2)
        #expect(
            after == ["job", "closure 1", "object 1", "closure 2", "object 2", "object deferred by object 2"])
    }

    private final class Flusher: EndOfTurnFlushing, @unchecked Sendable {
        // @unchecked Sendable invariant: created, run and released on the loop's thread.
        let log: Log
        init(_ log: Log) { self.log = log }
        func flushAtEndOfTurn() { log.lines.append("flush") }
    }

    private final class Work: AfterOutputWork, @unchecked Sendable {
        // @unchecked Sendable invariant: created, run and released on the loop's thread.
        let loop: EventLoop
        let log: Log
        let flusher: Flusher
        var runs = 0
        init(_ loop: EventLoop, _ log: Log, _ flusher: Flusher) {
            (self.loop, self.log, self.flusher) = (loop, log, flusher)
        }

        func runAfterOutput() {
            runs += 1
            log.lines.append("after \(runs)")
            loop.flushAtEndOfTurn(flusher)  // its own output
            guard runs == 1 else { return }
            let log = log
            loop.execute { log.lines.append("job of the next turn") }
            loop.afterOutput(self)  // more, in a later turn
        }
    }

    @Test func runsAfterTheTurnsOutputAndItsOwnOutputLeavesAfterIt() async throws {
        let loop = try EventLoop(name: "after-output")
        defer { loop.shutdown() }
        let log = Log()
        let inJob = try await loop.submit { () -> [String] in
            let flusher = Flusher(log)
            loop.afterOutput(Work(loop, log, flusher))
            loop.flushAtEndOfTurn(flusher)
            loop.deferUntilIdle { log.lines.append("deferred") }
            log.lines.append("job")
            return log.lines
        }
        #expect(inJob == ["job"])
        let after = try await Self.lines(of: log, on: loop, atLeast: 8)
        #expect(
            after == ["job", "deferred", "flush", "after 1", "flush", "job of the next turn", "after 2", "flush"])
    }

    /// The log once it holds at least `count` lines: a job submitted now may still run in the same turn as the
    /// first one, so ask until the turns ended.
    private static func lines(of log: Log, on loop: EventLoop, atLeast count: Int) async throws -> [String] {
        var lines: [String] = []
        for _ in 0..<1_000 {
            lines = try await loop.submit { log.lines }
            if lines.count >= count { break }
        }
        return lines
    }
}
