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

/// How quickly a `TransportLink` tries again after a failure: capped exponential backoff with jitter, after
/// gRPC's connection-backoff rules. The defaults are gRPC's: 1 s, growing ×1.6 per failed attempt up to 120 s,
/// each delay after the first spread by ±20 % so that a relay's clients, cut off together, do not come back in
/// step. The first retry after `networkChanged()` or a stateless reset is immediate.
public struct ReconnectBackoff: Hashable, Sendable {
    /// The delay before the first retry (default 1 s).
    public var initial: Duration
    /// How much the delay grows after each failed attempt (default 1.6).
    public var multiplier: Double
    /// The relative spread of each later delay (default 0.2: ±20 %); at least 0, below 1.
    public var jitter: Double
    /// The largest delay before jitter (default 120 s).
    public var maximum: Duration

    /// A backoff; every parameter defaults to gRPC's value.
    public init(
        initial: Duration = .seconds(1), multiplier: Double = 1.6, jitter: Double = 0.2,
        maximum: Duration = .seconds(120)
    ) {
        self.initial = initial
        self.multiplier = multiplier
        self.jitter = jitter
        self.maximum = maximum
    }

    var policy: ReconnectSchedule.Policy {
        var policy = ReconnectSchedule.Policy.grpc
        policy.initial = initial.nanoseconds
        policy.multiplier = multiplier
        policy.jitter = jitter
        policy.maximum = maximum.nanoseconds
        return policy
    }
}
