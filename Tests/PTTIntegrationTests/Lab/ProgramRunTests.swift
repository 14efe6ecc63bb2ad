import ChildProcesses
import Glibc
import TestSupport
import Testing

/// `runProgram`, which the tests and the benchmark run other programs with: output and status come back, and a
/// program that ignores SIGTERM at the timeout is killed (SIGKILL, reported as that signal) instead of waited on forever.
@Suite("Running a program to completion", .integration)
struct ProgramRunTests {
    @Test func outputAndStatusComeBack() async throws {
        let result = try await runProgram("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], timeout: 10)
        #expect(result.status == 3 && !result.signaled)
        #expect(result.stdout == "out\n" && result.stderr == "err\n")
    }

    @Test func aProgramIgnoringSIGTERMIsKilled() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let result = try await runProgram("/bin/sh", ["-c", "trap '' TERM; exec sleep 60"], timeout: 0.2)
        #expect(result.signaled && result.status == SIGKILL, "\(result)")
        #expect(clock.now - start < .seconds(30), "bounded: SIGTERM, 10 s, SIGKILL")
    }
}
