/// A server connection's rules for packets from a path other than its current one: which of them may reach ngtcp2
/// 0.12.1, so that no sequence of path changes, connection-ID frames and withheld ACKs reaches one of its aborts.
///
/// In 0.12.1 a server that receives a packet from a new path moves to it at once and validates it, keeping the old
/// path as a fallback. Two aborts hang on that:
/// - A second path change while such a validation runs makes the new validation inherit the old one's fallback
///   connection ID, whose sequence number the old one's end retires: a later retirement of the inherited ID retires
///   it twice (`ngtcp2_conn_track_retired_dcid_seq: Unreachable`). A packet from the fallback path while PMTUD runs
///   asserts too (`!conn->pmtud`).
/// - A path change that needs a retirement when 16 are unacknowledged asserts (`NGTCP2_ERR_CONN_ID_BLOCKED == rv`).
///
/// - A path change with a new connection ID while ngtcp2 still re-validates an earlier path (the check it starts
///   after a validation succeeds, whose connection ID may be the current one under another path) retires that ID
///   while the new validation keeps it as its fallback: the same double retirement.
///
/// So, while a path change is being validated or the old path re-validated, only packets from the current path
/// reach ngtcp2 (the others are dropped: the peer sends them again, and a real client changes path seldom).
/// - A validation that may fall back starts with every path change (the current path after a read differs from
///   the one before) and ends with the `path_validation` callback, except that a success answered through an
///   undersized PATH_CHALLENGE (under 1,200 bytes, as anti-amplification forces on a new path) starts a second one
///   of the same kind, which ends with the next callback.
/// - The re-validation ngtcp2 starts after the last success reports nothing when it ends. It lasts at most
///   `max(9 × PTO, PTO + 3 × initial RTT)` from its first probe (three PTOs of timeout, its probes' exponential
///   back-off past that, the first probes' expiry of at least three initial RTTs), so it is assumed to run for
///   `9 × PTO + 3 × initial RTT + revalidationSlack` after the success, with PTO the largest seen since the path
///   change.
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
    /// When the last validation succeeded, while ngtcp2 may still re-validate the old path.
    package private(set) var revalidationStart: UInt64?
    /// The largest PTO seen since the last path change (nanoseconds).
    package private(set) var largestPTO: UInt64 = 0
    /// Packets from another path kept from ngtcp2 so far.
    package private(set) var refusedPackets: UInt64 = 0

    /// Rules for a connection whose ngtcp2 uses `initialRTT` nanoseconds as its first RTT estimate.
    package init(initialRTT: UInt64) { self.initialRTT = initialRTT }

    /// Whether the rules follow a path change now (and want the PTO after every read).
    package var isTracking: Bool { validating || revalidationStart != nil }

    /// Whether a packet may reach ngtcp2 at `now`; nil: it may. Counts a refusal.
    package mutating func refusal(fromCurrentPath: Bool, sequenceNumbersSeen: UInt64, now: UInt64) -> Refusal? {
        if fromCurrentPath { return nil }
        if let start = revalidationStart, now >= start &+ revalidationLength { revalidationStart = nil }
        let refusal: Refusal?
        if validating {
            refusal = .validating
        } else if revalidationStart != nil {
            refusal = .revalidating
        } else {
            refusal = sequenceNumbersSeen > Self.retirementCapacity ? .retirementBudget : nil
        }
        if refusal != nil { refusedPackets += 1 }
        return refusal
    }

    /// How long ngtcp2's re-validation of the old path can last at most, with the PTOs seen so far.
    package var revalidationLength: UInt64 {
        let pto = min(largestPTO, UInt64(UInt32.max) * 1_000)  // keeps the sum from overflowing
        return 9 * pto + 3 * initialRTT + Self.revalidationSlack
    }

    /// A PTO of the connection, after a read or in a callback.
    package mutating func observe(pto: UInt64) { largestPTO = max(largestPTO, pto) }

    /// A read moved the connection to another path: ngtcp2 validates it, falling back on failure.
    package mutating func pathChanged(pto: UInt64) {
        validating = true
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
        } else if !answeredUndersizedChallenge {
            validating = false
            revalidationStart = now
        }
    }
}
