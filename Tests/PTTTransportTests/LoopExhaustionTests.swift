import Foundation
import PTTTransport
import Testing
import TransportCore
import TransportIO

/// Event loops that cannot start (the process is out of file descriptors) are a thrown `TransportError`, never a
/// trap: checked on the built `ptt-transport` run with a lowered RLIMIT_NOFILE, so this test process keeps its own.
@Suite("Event-loop creation failure: a clear error, not a crash")
struct LoopExhaustionTests {
    /// Runs the CLI under `ulimit -n limit` (bash lowers the limit, then execs the CLI in its place).
    static func cli(limit: Int, _ arguments: [String], timeout: TimeInterval = 30) async throws -> Subprocess.Result {
        try await Subprocess.run("/bin/bash", ["-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", Subprocess.cli]
            + arguments, timeout: timeout)
    }

    /// The Swift runtime and Dispatch hold eight descriptors (0-2, Dispatch's epoll, eventfd, two signalfds for
    /// SIGINT/SIGTERM, the main queue's eventfd); the event loop needs three more. Under these limits its eventfd
    /// or timerfd fails and the loop closes what it had opened, which leaves Dispatch its headroom. At exactly
    /// eight, or once the loop started and the CA file or socket took the last descriptor, Dispatch itself traps
    /// whenever it next needs one (it opens /proc/<tid>/stat to watch its threads): a crash outside this library.
    static let limits = [9, 10]

    @Test func connectUnderALowDescriptorLimitExitsWithOneErrorLine() async throws {
        var loopFailures = 0
        for limit in Self.limits {
            let result = try await Self.cli(limit: limit, [
                "connect", "127.0.0.1:9", "--ca", Fixtures.ca, "--transport", "tcp", "--timeout", "1"])
            Self.expectCleanFailure(result, limit: limit)
            if result.stderr.contains("cannot start an event loop") {
                loopFailures += 1
                #expect(result.stderr.contains("out of file descriptors"), "ulimit -n \(limit): \(result.stderr)")
            }
        }
        #expect(loopFailures > 0, "no limit in \(Self.limits) made the client's event loop fail to start")
    }

    @Test func serveUnderALowDescriptorLimitExitsWithOneErrorLine() async throws {
        var loopFailures = 0
        for limit in Self.limits {
            let result = try await Self.cli(limit: limit, [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey],
                timeout: 3)
            if result.stdout.hasPrefix("listening on") { continue }  // enough descriptors: it served until stopped
            Self.expectCleanFailure(result, limit: limit)
            if result.stderr.contains("cannot start an event loop") { loopFailures += 1 }
        }
        #expect(loopFailures > 0, "no limit in \(Self.limits) made the server's event loop fail to start")
    }

    static func expectCleanFailure(_ result: Subprocess.Result, limit: Int) {
        #expect(!result.signaled, "ulimit -n \(limit): killed by signal \(result.status): \(result.stderr)")
        #expect(result.status == 1, "ulimit -n \(limit): exit status \(result.status): \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("ptt-transport: "),
                "ulimit -n \(limit): expected one error line, got: \(result.stderr)")
        #expect(!result.stderr.contains("Fatal error"), "ulimit -n \(limit): \(result.stderr)")
    }
}

/// The shared client loop's cell: a failed creation is retried by the next use, a success is kept.
@Suite("RetryingLazy")
struct RetryingLazyTests {
    @Test func aFailedCreationIsRetriedAndASuccessKept() throws {
        let attempts = Counter()
        let lazy = RetryingLazy<Int> { () throws(TransportError) -> Int in
            let attempt = attempts.increment()
            if attempt < 3 { throw TransportError(.systemCallFailed, "attempt \(attempt): out of descriptors") }
            return attempt * 10
        }
        #expect(throws: TransportError.self) { try lazy.get() }
        #expect(throws: TransportError.self) { try lazy.get() }
        #expect(try lazy.get() == 30)
        #expect(try lazy.get() == 30)
        #expect(attempts.value == 3)
    }

    final class Counter: Sendable {
        private let count = Locked(0)
        var value: Int { count.withLock { $0 } }
        func increment() -> Int { count.withLock { count in
            count += 1
            return count
        } }
    }
}
