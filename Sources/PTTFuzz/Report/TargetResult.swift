/// What fuzzing one target produced.
public struct TargetResult: Sendable {
    /// The target's name (`qmux-records`, `relay-udp`, ...).
    public var name: String
    /// Inputs fed.
    public var inputs = 0
    /// Inputs the target refused with its typed error (or, live, ignored / closed without answering).
    public var rejected = 0
    /// Inputs it accepted (or, live, answered).
    public var accepted = 0
    /// Crashes: traps, aborts, deaths by signal, unexpected exits of a child relay.
    public var crashes = 0
    /// Health checks passed (a legitimate client had a message and a datagram echoed); live targets only.
    public var healthPassed = 0
    /// Health checks failed (after three attempts); live targets only.
    public var healthFailed = 0
    /// Wall-clock seconds spent on the target.
    public var wallSeconds = 0.0
    /// CPU seconds spent: the fuzzing thread's for parser targets; this process's plus the child relay's for
    /// live targets.
    public var cpuSeconds = 0.0
    /// Crash and health-check details: target, input in hex, what happened.
    public var findings: [String] = []

    /// An empty result for `name`.
    public init(name: String) { self.name = name }

    /// Counts one outcome.
    mutating func count(accepted wasAccepted: Bool) {
        inputs += 1
        if wasAccepted { accepted += 1 } else { rejected += 1 }
    }
}
