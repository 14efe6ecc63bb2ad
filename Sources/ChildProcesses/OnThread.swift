import Foundation

/// Runs a blocking `body` on a thread of its own and returns its result to the awaiting task: blocking a
/// cooperative-pool thread (two on a 2-core machine) would starve whatever else the process runs.
package func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// SIGTERM, at most `within` seconds to exit, then SIGKILL; returns once `process` has ended. Blocks: call it from
/// `onThread` (or a `defer` at the end of a test).
func terminate(_ process: Process, within: TimeInterval) {
    if process.isRunning { process.terminate() }
    let deadline = Date().addingTimeInterval(within)
    while process.isRunning && Date() < deadline { usleep(5_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    waitForExit(process)
}

/// Waits until Foundation saw `process` end, for at most `within` seconds; false if it did not (then its
/// termination status is unknown). Unlike `Process.waitUntilExit`, it never spins forever: when the child's exit
/// never reaches Foundation (seen under ThreadSanitizer: two tests stuck at 100 % CPU with the children gone), it
/// returns once the kernel no longer knows the child, or at the deadline.
@discardableResult
package func waitForExit(_ process: Process, within: TimeInterval = 10) -> Bool {
    let pid = process.processIdentifier
    let deadline = Date().addingTimeInterval(within)
    while process.isRunning {
        var info = siginfo_t()
        // WNOWAIT: only look; Foundation's own reaper still collects the status.
        let rv = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        if rv != 0 && errno == ECHILD { return false }  // reaped by someone else: it is gone
        if Date() >= deadline { return false }
        usleep(5_000)
    }
    return true
}
