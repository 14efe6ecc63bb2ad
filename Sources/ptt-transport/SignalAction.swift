import Dispatch
import Glibc
import Synchronization

/// What SIGHUP does: set by `serve` once it listens (reload the certificate, key, ticket keys and token secret; the
/// supervisor of `--workers` passes it on to its workers), run at each signal. Until then SIGHUP is ignored. The
/// signal is watched from the first `set` only: a dispatch source costs descriptors, which a process started with
/// very few must keep for its clear error.
enum HangupReload {
    private static let action = Mutex<(@Sendable () async -> Void)?>(nil)
    // nonisolated(unsafe) invariant: read and written only under `action`'s lock (kept alive for the process).
    nonisolated(unsafe) private static var source: DispatchSourceSignal?

    static func set(_ reload: @escaping @Sendable () async -> Void) {
        action.withLock { action in
            action = reload
            guard source == nil else { return }
            let watch = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
            watch.setEventHandler {
                if let reload = HangupReload.current { Task { await reload() } }
            }
            watch.resume()
            source = watch
        }
    }

    static var current: (@Sendable () async -> Void)? { action.withLock { $0 } }
}
