/// Decides whether a ticket may carry 0-RTT: the server's anti-replay memory, in this process
/// (`AntiReplayStore`) or shared by a fleet (the Redis store in TransportIO). Called on the event loop that runs
/// the handshake, synchronously, from GnuTLS' hooks.
package protocol ZeroRTTAdmission: AnyObject {
    /// The server issued `ticket`: false when it will never carry 0-RTT (over the issuing budget).
    func issue(_ ticket: TicketDigest) -> Bool
    /// A ClientHello offers `ticket` with early data, and GnuTLS checked that it was created after
    /// `recordingStart` (unix seconds; see `rememberedSince`): true (accept) at most once fleet-wide, else false.
    func redeem(_ ticket: TicketDigest, recordingStart: Int64) -> Bool
    /// How long after issue a ticket may carry 0-RTT, in seconds.
    var window: Int64 { get }
    /// Whether what it remembers outlives this process (a restarted relay may then accept 0-RTT for tickets issued
    /// before it started: their use is remembered elsewhere).
    var outlivesProcess: Bool { get }
    /// For a store that outlives the process: since when (unix seconds) it remembers every ticket used, as far as
    /// this process knows (nil: unknown yet, or a store that does not outlive the process). A ticket created
    /// before then may have carried 0-RTT in a memory the store lost (a Redis restarted empty, a failover).
    var rememberedSince: Int64? { get }
    /// What it decided so far.
    var counters: AntiReplayCounters { get }
}

/// What an anti-replay store decided so far (for statistics and tests).
package struct AntiReplayCounters: Equatable, Sendable {
    /// Tickets recorded at issue (their 0-RTT has room reserved).
    package var issued: UInt64 = 0
    /// Tickets (in-process store) or 0-RTT attempts (shared store) beyond the budget: their early data is refused.
    package var overBudget: UInt64 = 0
    /// 0-RTT attempts accepted (first use of a ticket within its window).
    package var accepted: UInt64 = 0
    /// 0-RTT attempts refused because the ticket had carried 0-RTT already (replays).
    package var duplicates: UInt64 = 0
    /// 0-RTT attempts refused because the ticket's window had ended.
    package var expired: UInt64 = 0
    /// 0-RTT attempts refused because the ticket was never recorded here (over budget, another process).
    package var unknown: UInt64 = 0
    /// 0-RTT attempts refused because the shared store did not answer in time: unreachable, slower than the
    /// deadline, an error reply or a reply that is not RESP (fail closed).
    package var unavailable: UInt64 = 0
}

extension AntiReplayCounters {
    /// All zero (for other modules: the initializers Swift writes are internal).
    package static let zero = AntiReplayCounters()
}
