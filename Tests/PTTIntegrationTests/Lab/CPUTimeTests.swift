import ChildProcesses
import TestSupport
import Testing

/// Another process's CPU time, which the benchmark meters a child relay with: it grows while the child spins, finer
/// than /proc's 10 ms ticks, and is 0 once the process is gone.
@Suite("CPU time of another process", .integration)
struct CPUTimeTests {
    @Test func aSpinningChildsCPUIsReadFinerThanATick() async throws {
        let child = try await ChildServer.start(
            "/bin/sh", ["-c", "echo 'listening on 127.0.0.1:9'; while :; do :; done"])
        let pid = child.processIdentifier
        let first = CPUTime.process(pid)
        var readings = [first]
        for _ in 0..<20 {
            try await Task.sleep(for: .milliseconds(15))
            readings.append(CPUTime.process(pid))
        }
        child.kill()
        #expect(readings.last! - first > 0.02, "the child spun for about 300 ms: \(readings)")
        #expect(readings == readings.sorted(), "CPU time never goes back")
        let fractions = readings.map { ($0 * 1000).truncatingRemainder(dividingBy: 10) }
        #expect(fractions.contains { $0 > 0.001 && $0 < 9.999 }, "nanosecond readings, not 10 ms ticks: \(readings)")
        #expect(CPUTime.process(pid) == 0, "gone")
    }
}
