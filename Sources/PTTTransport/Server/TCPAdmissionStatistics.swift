/// How a relay's TCP listener has been admitting connections: what is pending now and what it turned away, for
/// monitoring floods (Slowloris) and descriptor exhaustion. Counters run from `bind`.
public struct TCPAdmissionStatistics: Sendable, Hashable {
    /// Connections accepted whose handshake (TLS and QMux parameters) has not finished.
    public var pendingHandshakes = 0
    /// Connections reset at accept because their source already had `maxPendingTCPHandshakesPerSource` pending.
    public var refusedOverSourceBudget = 0
    /// Connections reset at accept because their source held or opened more than `perSourceLimits` allows (the
    /// same budget as QUIC's, so a client refused there cannot get round it by falling back to TCP).
    public var refusedOverSourceLimits = 0
    /// Pending handshakes reset to make room for a newcomer once `maxPendingTCPHandshakes` were pending.
    public var evictedPendingHandshakes = 0
    /// Connections reset at accept because the process had only its descriptor reserve left (a few descriptors
    /// below RLIMIT_NOFILE are kept for the rest of the process).
    public var refusedForDescriptors = 0
    /// accept() failures (EMFILE when descriptors are used elsewhere, ENFILE, ENOMEM); after each the listener
    /// pauses for 100 ms instead of retrying at once.
    public var acceptFailures = 0

    /// All counters zero, as a server without a TCP listener reports them.
    public init() {}
}
