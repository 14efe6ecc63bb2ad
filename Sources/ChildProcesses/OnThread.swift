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
    process.waitUntilExit()
}
