import Foundation

/// What `ptt-lab fuzz` should run.
public struct FuzzOptions: Sendable {
    /// Total inputs across all targets (parsers get most, the live sockets fewer, the CLI at most 150).
    public var iterations = 100_000
    /// The seed every input derives from.
    public var seed: UInt64 = 1
    /// The `ptt-transport` executable: runs the relay as a child `serve` and fuzzes the CLI. nil (tests): the
    /// relay runs in this process and the CLI target is skipped.
    public var executable: String?
    /// The relay's certificate and key, and the CA the health-check clients trust.
    public var certificates = Certificates(directory: "certs")
    /// Where progress lines go (stderr in the CLI).
    public var progress: @Sendable (String) -> Void = { _ in }

    /// Defaults: 100 000 inputs, seed 1, in-process relay.
    public init() {}
}

/// How a budget of `iterations` inputs is shared.
public struct FuzzBudget: Sendable, Equatable {
    /// Datagrams to the relay's UDP socket (2 %, at least 20).
    public var relayUDP: Int
    /// Connections to the relay's TCP port (0.5 %, at least 10).
    public var relayTCP: Int
    /// Connections carrying a QMux stream inside a real TLS session (0.5 %, at least 10).
    public var relayQMux: Int
    /// CLI runs (one per 5000 inputs, 5 to 150; 0 without an executable).
    public var cli: Int
    /// Plans of the hostile Redis the relay's Redis client is run against (0.1 %, at least 10).
    public var redisClient: Int
    /// Inputs for each parser target, in `weights` order: the rest, shared by weight (what rounding leaves goes
    /// to the first, so the budget is spent exactly when it exceeds the minimums).
    public var parsers: [Int]

    /// Shares `iterations` among the live targets, the CLI and parser targets of the given `weights`.
    public init(iterations: Int, weights: [Int], withCLI: Bool) {
        relayUDP = max(20, iterations / 50)
        relayTCP = max(10, iterations / 200)
        relayQMux = max(10, iterations / 200)
        cli = withCLI ? min(150, max(5, iterations / 5000)) : 0
        redisClient = max(10, iterations / 1000)
        let rest = max(weights.count, iterations - relayUDP - relayTCP - relayQMux - cli - redisClient)
        let total = max(1, weights.reduce(0, +))
        parsers = weights.map { max(1, rest * $0 / total) }
        if !parsers.isEmpty { parsers[0] += max(0, rest - parsers.reduce(0, +)) }
    }

    /// Health checks per live target: about 20 per target.
    func healthEvery(_ count: Int) -> Int { max(10, count / 20) }
}
