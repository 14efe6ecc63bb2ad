import Foundation

/// Runs blocking work on a thread of its own, never on the cooperative pool.
enum Blocking {
    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }
}
