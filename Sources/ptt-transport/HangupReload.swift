import Synchronization

/// What SIGHUP does: set by `serve` (reload the certificate, key, ticket keys and token secret; the supervisor of
/// `--workers` passes it on to its workers), run at each signal. Without one, SIGHUP is ignored.
enum HangupReload {
    private static let action = Mutex<(@Sendable () async -> Void)?>(nil)

    static func set(_ reload: @escaping @Sendable () async -> Void) { action.withLock { $0 = reload } }

    static var current: (@Sendable () async -> Void)? { action.withLock { $0 } }
}
