import Dispatch
import Glibc
import Synchronization

/// What a signal other than SIGINT/SIGTERM does in `serve`: set once the relay listens, run at each signal; until
/// then the signal is ignored (`main` ignores both). A signal is watched from the first `set` only: a dispatch
/// source costs descriptors, which a process started with very few must keep for its clear error.
final class SignalAction: Sendable {
    /// SIGHUP: reload the certificate, key, ticket keys and token secret (the supervisor of `--workers` passes it
    /// on to its workers).
    static let hangupReload = SignalAction(SIGHUP)
    /// SIGUSR2 to the supervisor of `--workers`: an in-place upgrade (`ServeWorkers`); ignored by a worker and by a
    /// single-process relay.
    static let upgrade = SignalAction(SIGUSR2)

    private let signalNumber: Int32
    // The action, and the source watching the signal (kept alive for the process once made).
    private let state = Mutex<(action: (@Sendable () async -> Void)?, source: DispatchSourceSignal?)>((nil, nil))

    private init(_ signalNumber: Int32) { self.signalNumber = signalNumber }

    func set(_ action: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            state.action = action
            guard state.source == nil else { return }
            let watch = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            watch.setEventHandler { [self] in
                if let action = current { Task { await action() } }
            }
            watch.resume()
            state.source = watch
        }
    }

    var current: (@Sendable () async -> Void)? { state.withLock { $0.action } }
}
