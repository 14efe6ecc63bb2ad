import TransportCore

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
