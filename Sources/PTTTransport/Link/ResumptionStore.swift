import Foundation
import TransportCore

/// Where a `TransportLink` keeps the `ResumptionState` it needs for a fast reconnect: a file, the app's own
/// storage (keychain) through two closures, or memory only. The link saves every refreshed state (each
/// NewSessionTicket and NEW_TOKEN) and loads it once, before its first connection.
///
/// - Important: The state holds a session secret: store it like a credential.
public struct ResumptionStore: Sendable {
    let load: @Sendable () -> ResumptionState?
    let save: @Sendable (ResumptionState) -> Void

    /// A store that reads with `load` (nil: nothing saved) and writes with `save`. Both run on the link's task
    /// and must not block for long.
    public init(
        load: @escaping @Sendable () -> ResumptionState?, save: @escaping @Sendable (ResumptionState) -> Void
    ) {
        self.load = load
        self.save = save
    }

    /// Keeps the state in memory only: reconnects within the process resume, a new process connects cold.
    public static var memoryOnly: ResumptionStore { ResumptionStore(load: { nil }, save: { _ in }) }

    /// Keeps the state in the file at `path` (`ResumptionState.save(to:)`: mode 0600, replaced atomically).
    /// `onError` hears about a file that cannot be read (the link then connects cold) or written.
    public static func file(
        _ path: String, onError: @escaping @Sendable (TransportError) -> Void = { _ in }
    ) -> ResumptionStore {
        ResumptionStore(
            load: {
                do { return try ResumptionState.load(from: path) } catch {
                    onError(error as? TransportError ?? TransportError(.resumptionStateUnusable, "\(error)"))
                    return nil
                }
            },
            save: { state in
                do { try state.save(to: path) } catch {
                    onError(error as? TransportError ?? TransportError(.invalidConfiguration, "\(error)"))
                }
            })
    }
}
