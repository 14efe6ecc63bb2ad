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
    /// Early data refused for a ticket this process never recorded (in-process store), that did not open, or that
    /// was older than the window or than what the shared store remembers.
    public var refusedUnknownOrExpired: UInt64 = 0
    /// Early data refused because the shared store (Redis) had lost or changed its memory since this relay last
    /// looked — flushed, keys evicted or deleted, restarted, failed over, another Redis behind the same address:
    /// its marker was written anew, and tickets issued before it are refused 0-RTT from then on (fail closed).
    public var refusedStoreMemoryLost: UInt64 = 0
    /// Early data refused because the relay already held as many first flights as it may while asking the shared
    /// store, or the flight grew past its bound while held: refused at once, the handshake went on in 1-RTT.
    public var refusedNotHeld: UInt64 = 0

    /// All zero.
    public init() {}

    init(_ counters: AntiReplayCounters) {
        accepted = counters.accepted
        replaysRefused = counters.duplicates
        refusedStoreUnavailable = counters.unavailable
        refusedOverBudget = counters.overBudget
        refusedUnknownOrExpired = counters.unknown + counters.expired
        refusedStoreMemoryLost = counters.memoryLost
        refusedNotHeld = counters.notHeld
    }
}
