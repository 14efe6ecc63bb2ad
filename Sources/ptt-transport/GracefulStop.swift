import Foundation

/// What the first SIGTERM does instead of exiting at once: set by a command (`serve` drains its relay), taken
/// once by the signal handler.
enum GracefulStop {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var action: (@Sendable () async -> Void)?  // guarded by `lock`

    static func set(_ stop: @escaping @Sendable () async -> Void) {
        lock.withLock { action = stop }
    }

    static func take() -> (@Sendable () async -> Void)? {
        lock.withLock {
            defer { action = nil }
            return action
        }
    }
}
