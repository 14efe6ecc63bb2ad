/// A server connection's rules for packets from a path other than its current one: which of them may reach ngtcp2
/// 0.12.1, so that no sequence of path changes, connection-ID frames and withheld ACKs reaches one of its aborts.
///
/// In 0.12.1 a server that receives a packet from a new path moves to it at once and validates it, keeping the old
/// path as a fallback; after a success it re-validates the old path, silently. What can abort:
/// - A path change that makes ngtcp2 take a new connection ID of the peer's (the packet names a connection ID of the
///   server's it never used, comes to another local address, or comes from a path a PATH_CHALLENGE bound an ID to)
///   while a validation or re-validation runs whose own ID has the sequence number of its fallback (the change
///   before kept the peer's ID, as a NAT rebinding does). ngtcp2 retires that ID when it drops the running
///   validation, yet the new validation keeps the same number as its fallback and retires it again when it ends:
///   `ngtcp2_conn_track_retired_dcid_seq: Unreachable`.
/// - A packet from the fallback path while ngtcp2 validates a path the second time (after a success answered through
///   a PATH_CHALLENGE anti-amplification cut under 1,200 bytes): PMTUD runs then, and moving back asserts
///   (`!conn->pmtud`). The fallback is the path left, or, when the change dropped a validation that falls back, that
///   validation's fallback: after a chain of changes it may be a path left several changes ago (the fifth long run
///   found such a chain at sequence 25,800).
/// - A path change that needs a retirement when 16 are unacknowledged asserts (`NGTCP2_ERR_CONN_ID_BLOCKED == rv`).
///
/// The rules apply to 1.x too: 1.11 (and upstream through v1.25.0) keeps the last two assertions, and without these
/// rules the stateful fuzzer's `retire-table` script aborts a 1.11 relay with `conn_recv_pkt: Assertion
/// 'NGTCP2_ERR_CONN_ID_BLOCKED == rv'`. (A duplicate retirement is a plain error there since the `ngtcp2_dcidtr`
/// rewrite, which only makes the first rule stricter than 1.11 needs.)
///
/// So, while any validation may run, a packet from another path reaches ngtcp2 only when it surely keeps the peer's
/// connection ID (it names the server's ID that made the path change, comes to the current local address, and no
/// PATH_CHALLENGE ever came), and never from any other path during a second validation; the others
/// are dropped (the peer sends them again; a NAT rebinding, even every 100 ms, keeps the ID). A validation may run
/// while the callbacks below say so, and also until 3 × (PTO + 3 × initial RTT) after the connection last sent a
/// PATH_CHALLENGE (every validation sends one when it starts, and times out within that), so a validation the
/// callbacks do not tell of is covered too.
/// - A validation starts with every path change (the current path after a read differs from the one before) and
///   ends with the `path_validation` callback, except that a success answered through an undersized challenge
///   starts the second validation, which ends with the next callback, at the latest within the bound below.
/// - The re-validation ngtcp2 starts after the last success reports nothing when it ends. It lasts at most
///   `max(9 × PTO, PTO + 3 × initial RTT)` from its first probe: its timeout is 3 PTO; a probe goes out only
///   before that, and one of back-off round r ≥ 1 expires within twice the timeout (the round before expired
///   within it); round 0's expire after `max(PTO, 3 × initial RTT)`. So it is assumed to run for that plus
///   `revalidationSlack` after the success, with PTO the largest seen since the path change.
/// Meanwhile every packet with a NEW_CONNECTION_ID that has, or follows one that had, a `retire_prior_to` above 0 is
/// dropped, whatever its path (`FrameGuard`): it could make ngtcp2 retire and replace the IDs these validations hold.
/// And once the peer could have made ngtcp2 hold more than 16 connection-ID sequence numbers, no path change is
/// admitted at all: each number is retired at most once, so at most that many retirements can ever be pending.
package struct PathChangeRules: Sendable, Equatable {
    /// The unacknowledged retirements ngtcp2 0.12.1 keeps (`NGTCP2_MAX_DCID_POOL_SIZE * 2`).
    package static let retirementCapacity: UInt64 = 16
    /// Added to the re-validation's longest life: the time from the success to ngtcp2's first probe.
    package static let revalidationSlack: UInt64 = 250_000_000

    /// Why a packet from another path was kept from ngtcp2.
    package enum Refusal: Equatable, Sendable {
        /// A validation that may fall back is running.
        case validating
        /// ngtcp2 may still be re-validating the path the connection left.
        case revalidating
        /// The peer could have made ngtcp2 hold more than `retirementCapacity` sequence numbers.
        case retirementBudget
    }

    /// The initial RTT ngtcp2 was configured with (nanoseconds).
    package let initialRTT: UInt64
    /// Whether a validation that may fall back is running.
    package private(set) var validating = false
    /// Whether that validation is the second one, after a success through an undersized challenge (PMTUD runs).
    package private(set) var validatingAgain = false
    /// When the first validation succeeded through an undersized challenge.
    private var validatingAgainSince: UInt64 = 0
    /// When the last validation succeeded, while ngtcp2 may still re-validate the old path.
    package private(set) var revalidationStart: UInt64?
    /// Until when the last PATH_CHALLENGE sent says a validation may still run (see `challengeSent`).
    package private(set) var challengeHoldEnd: UInt64 = 0
    /// The largest PTO seen since the last path change (nanoseconds).
    package private(set) var largestPTO: UInt64 = 0
    /// Packets from another path kept from ngtcp2 so far.
    package private(set) var refusedPackets: UInt64 = 0

    /// Rules for a connection whose ngtcp2 uses `initialRTT` nanoseconds as its first RTT estimate.
    package init(initialRTT: UInt64) { self.initialRTT = initialRTT }

    /// Whether the rules follow a path change now (and want the PTO after every read).
    package var isTracking: Bool { validating || revalidationStart != nil }

    /// Whether a path change may still be settling at `now` (a validation, the re-validation's longest life, or the
    /// hold after a PATH_CHALLENGE).
    package func isTracking(at now: UInt64) -> Bool {
        var settled = self
        settled.expire(now: now)
        return settled.isTracking || now < challengeHoldEnd
    }

    /// Whether a packet may reach ngtcp2 at `now`; nil: it may. Counts a refusal. `keepsConnectionID`: ngtcp2 surely
    /// keeps the peer's connection ID if this packet moves the connection (see the type's notes).
    package mutating func refusal(
        fromCurrentPath: Bool, keepsConnectionID: Bool = false, sequenceNumbersSeen: UInt64, now: UInt64
    ) -> Refusal? {
        if fromCurrentPath { return nil }
        expire(now: now)
        // While any validation of ngtcp2's may run, only a packet that surely keeps the peer's connection ID may
        // move the connection, and none during a second validation (PMTUD runs: moving back to the fallback asserts,
        // and which path that is depends on the whole chain of changes). Not even one from the path left that may
        // take a new ID: whether ngtcp2 treats it as the way back depends on which validation runs, and the first
        // long fuzz run found a sequence (49,164) where it did not, and the validation that followed retired an ID a
        // second time.
        let refusal: Refusal?
        if validating && (!keepsConnectionID || validatingAgain) {
            refusal = .validating
        } else if (revalidationStart != nil || now < challengeHoldEnd) && !keepsConnectionID {
            refusal = .revalidating
        } else {
            refusal = sequenceNumbersSeen > Self.retirementCapacity ? .retirementBudget : nil
        }
        if refusal != nil { refusedPackets += 1 }
        return refusal
    }

    /// Ends what must have ended by `now`: the silent re-validation, and a second validation whose callback did not
    /// come within the same bound. (A packet answering several challenges at once counts as undersized if any of
    /// them was, which may be wrong; then ngtcp2 started the silent re-validation instead, which ends within that
    /// bound too. A real second validation has the same timeout rules, so its callback always comes before.)
    mutating func expire(now: UInt64) {
        if let start = revalidationStart, now >= start &+ revalidationLength { revalidationStart = nil }
        if validatingAgain && now >= validatingAgainSince &+ revalidationLength {
            validating = false
            validatingAgain = false
        }
    }

    /// How long ngtcp2's re-validation of the old path can last at most, with the PTOs seen so far.
    package var revalidationLength: UInt64 {
        let pto = min(largestPTO, UInt64(UInt32.max) * 1_000)  // keeps the sums from overflowing
        return max(9 * pto, pto + 3 * initialRTT) + Self.revalidationSlack
    }

    /// The connection sent a PATH_CHALLENGE at `now`, with `pto` its PTO then: some validation of ngtcp2's runs, and
    /// may run until its timeout, at most 3 × max(PTO, initial PTO) after its first challenge (the initial PTO is at
    /// most 3 × initial RTT plus the peer's ACK delay, which the PTO includes). Until then the rules hold as during
    /// the re-validation, whatever the callbacks said: this covers a validation the callbacks do not tell of.
    package mutating func challengeSent(pto: UInt64, now: UInt64) {
        let pto = min(pto, UInt64(UInt32.max) * 1_000)
        challengeHoldEnd = max(challengeHoldEnd, now &+ 3 * (pto + 3 * initialRTT) &+ Self.revalidationSlack)
    }

    /// A PTO of the connection, after a read or in a callback.
    package mutating func observe(pto: UInt64) { largestPTO = max(largestPTO, pto) }

    /// A read moved the connection to another path: ngtcp2 validates it, falling back on failure.
    package mutating func pathChanged(pto: UInt64) {
        validating = true
        validatingAgain = false
        revalidationStart = nil
        largestPTO = pto
    }

    /// The `path_validation` callback at `now`: a failure or an abort ends the validation; a success ends it unless
    /// the PATH_RESPONSE answered an undersized challenge (then ngtcp2 validates the path again, and may still fall
    /// back), and starts ngtcp2's re-validation of the old path.
    package mutating func validationEnded(succeeded: Bool, answeredUndersizedChallenge: Bool, pto: UInt64, now: UInt64)
    {
        observe(pto: pto)
        guard validating else { return }
        if !succeeded {
            validating = false
        } else if answeredUndersizedChallenge {
            validatingAgain = true
            validatingAgainSince = now
        } else {
            validating = false
            revalidationStart = now
        }
    }
}
