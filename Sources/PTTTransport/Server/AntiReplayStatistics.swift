import TransportCore

/// What a server's 0-RTT anti-replay store decided since the server started, over every event loop
/// (``TransportServer/antiReplayStatistics()``).
public struct AntiReplayStatistics: Hashable, Sendable {
    /// Early data accepted: first use of a ticket within its window.
    public var accepted: UInt64 = 0
    /// Early data refused because the ticket had carried 0-RTT already (here or, with Redis, at any relay).
    public var replaysRefused: UInt64 = 0
    /// Early data refused because the shared store (Redis) was unreachable, slower than its deadline, or answered
    /// with an error (fail closed; the handshakes completed in 1-RTT).
    public var refusedStoreUnavailable: UInt64 = 0
    /// Early data refused over the budget: tickets issued beyond it (in-process) or attempts beyond this relay's
    /// share of the Redis store.
    public var refusedOverBudget: UInt64 = 0
    /// Early data refused for a ticket this process never recorded or whose window ended (in-process store).
    public var refusedUnknownOrExpired: UInt64 = 0

    /// All zero.
    public init() {}

    init(_ counters: AntiReplayCounters) {
        accepted = counters.accepted
        replaysRefused = counters.duplicates
        refusedStoreUnavailable = counters.unavailable
        refusedOverBudget = counters.overBudget
        refusedUnknownOrExpired = counters.unknown + counters.expired
    }
}
