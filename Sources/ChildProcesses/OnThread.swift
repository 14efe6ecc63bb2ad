import Foundation

/// Runs a blocking `body` on a thread of its own and returns its result to the awaiting task: blocking a
/// cooperative-pool thread (two on a 2-core machine) would starve whatever else the process runs.
package func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}
