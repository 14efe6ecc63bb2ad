/// Decides whether a ticket may carry 0-RTT: the server's anti-replay memory, in this process
/// (`AntiReplayStore`) or shared by a fleet (the Redis store in TransportIO). Called on the event loop that runs
/// the handshake, from GnuTLS' hooks: `admit` synchronously, and for a shared store whose answer takes a round
/// trip, `claim` (the handshake's first flight is held meanwhile and fed again with the answer, see
/// `GnuTLSAntiReplay`), so the loop never waits for the store.
package protocol ZeroRTTAdmission: AnyObject {
    /// The server issued `ticket`: false when it will never carry 0-RTT (over the issuing budget).
    func issue(_ ticket: TicketDigest) -> Bool
    /// A ClientHello offers `ticket` with early data, and GnuTLS checked that it was created after
    /// `recordingStart` (unix seconds; see `rememberedSince`): accept or refuse at once where the store can (at most
    /// one acceptance fleet-wide per ticket), or `ask` when only a round trip to a shared store can tell.
    func admit(_ ticket: TicketDigest, recordingStart: Int64) -> ZeroRTTDecision
    /// After `admit` answered `ask`: claims `ticket` in the shared store and calls `answer` once, on this thread,
    /// never from within this call: true when this claim was the ticket's first use fleet-wide. Within the store's
    /// deadline whatever the store does (fail closed: false when it is unreachable, slow or answers an error).
    func claim(_ ticket: TicketDigest, answer: @escaping (Bool) -> Void)
    /// Counts what the store did not decide itself: early data accepted with a claim's answer (counted when GnuTLS
    /// takes it, not when the store gives it: a flight fed again may not get that far), or refused before the store
    /// decided (GnuTLS refused the ticket itself, or the first flight could not be held while the store was asked).
    func count(_ tally: ZeroRTTTally)
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

/// What a store decides at once about a ticket offered with early data (`ZeroRTTAdmission.admit`).
package enum ZeroRTTDecision: Equatable, Sendable {
    /// The ticket's first use: accept its early data.
    case accept
    /// Refuse its early data (the store counted why); the handshake goes on in 1-RTT.
    case refuse
    /// Only a round trip to the shared store can tell: hold the first flight and `claim` the ticket.
    case ask
}

/// What happened to early data outside the store's own decisions (`ZeroRTTAdmission.count`).
package enum ZeroRTTTally: Equatable, Sendable {
    /// Accepted: GnuTLS took a claim's positive answer for the flight fed again.
    case acceptedAfterClaim
    /// GnuTLS refused the ticket before asking: it did not open (another key, damaged), was older than the window
    /// or than the store's memory, or the ClientHello offered several tickets.
    case ticketUnknownOrExpired
    /// The store had to be asked, but the loop already held as many first flights as it may (or this one grew
    /// past its bound while held): refused at once rather than wait.
    case notHeld
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
    /// 0-RTT attempts refused because the ticket's window had ended, or it predates what the store remembers.
    package var expired: UInt64 = 0
    /// 0-RTT attempts refused because the ticket was never recorded here (over budget, another process) or did
    /// not open.
    package var unknown: UInt64 = 0
    /// 0-RTT attempts refused because the shared store did not answer in time: unreachable, slower than the
    /// deadline, an error reply or a reply that is not RESP (fail closed).
    package var unavailable: UInt64 = 0
    /// 0-RTT attempts refused because the shared store had lost or changed its memory since this relay last
    /// looked (flushed, evicted, restarted, failed over, another Redis): it was marked anew, and tickets issued
    /// before are refused from then on.
    package var memoryLost: UInt64 = 0
    /// 0-RTT attempts refused because the first flight could not be held while the shared store was asked.
    package var notHeld: UInt64 = 0
}

extension AntiReplayCounters {
    /// All zero (for other modules: the initializers Swift writes are internal).
    package static let zero = AntiReplayCounters()

    /// Adds one to the counter of `tally`.
    package mutating func count(_ tally: ZeroRTTTally) {
        switch tally {
        case .acceptedAfterClaim: accepted += 1
        case .ticketUnknownOrExpired: unknown += 1
        case .notHeld: notHeld += 1
        }
    }
}

extension ZeroRTTAdmission {
    /// A store that decides everything in `admit` never asks: nothing to claim.
    package func claim(_ ticket: TicketDigest, answer: @escaping (Bool) -> Void) { answer(false) }
}
