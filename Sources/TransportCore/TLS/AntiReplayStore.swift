import Glibc

/// The 0-RTT anti-replay memory of a server: a ticket can carry 0-RTT only if this store reserved an entry for it
/// when the server issued it, and only once (single-use tickets for early data, RFC 8446 §8.1).
///
/// A stranger cannot fill it faster than the server issues tickets, and what it fills never touches tickets
/// already issued (issue 21, item 13):
/// - `issue` is called for every ticket the server sends. Within the budget (`capacity` tickets per `window`) the
///   ticket gets an entry reserved until its 0-RTT window ends (`window` after issue); beyond it the ticket is
///   not recorded, still resumes in 1-RTT, and its early data is refused. A flood of handshakes spends the budget
///   for the flood's own tickets: the entries of tickets already in clients' hands stay reserved.
/// - `redeem` is called when a ClientHello offers a ticket with early data: accepted once for a recorded ticket
///   within its window; refused (fail closed) for a second use, an expired ticket, or a ticket this store never
///   recorded — over budget, issued before a restart, or issued by another process sharing the ticket key, so a
///   first flight replayed to another instance of a fleet is refused there too.
///
/// Memory: `capacity` entries at most (about 150 bytes each, measured in the README), whatever the peers do.
/// Time: O(1) per call; expired entries leave in issue order, a few per `issue` (no rebuild, no scan).
///
/// One store serves a whole server: when its event loops each run their own GnuTLS contexts, they all record into
/// the same store, which the `serialize` lock its owner passes guards (TransportCore has no threads and no lock
/// of its own). Sans-IO: the clock is `now`, injectable.
package final class AntiReplayStore: ZeroRTTAdmission, @unchecked Sendable {
    // @unchecked Sendable invariant: `state` is touched only inside `serialize`, a lock whenever several threads
    // share the store (without one, the store stays on the one event loop that created it).
    private struct Entry {
        var deadline: Int64  // seconds since the epoch: the end of the ticket's 0-RTT window
        var used: Bool
    }

    private struct State {
        var entries: [TicketDigest: Entry] = [:]
        var order = FIFOQueue<TicketDigest>()  // the tickets recorded, oldest first (deadlines ascend)
        var counters = Counters()
    }

    /// What the store decided so far (for statistics and tests).
    package typealias Counters = AntiReplayCounters

    /// The most entries, that is the most tickets issued with 0-RTT within one `window`.
    package let capacity: Int
    /// How long after issue a ticket may carry 0-RTT, in seconds.
    package let window: Int64
    /// The wall clock, in seconds (injectable for tests).
    package var now: () -> Int64 = { Int64(time(nil)) }

    private var state = State()
    private let serialize: @Sendable (() -> Void) -> Void
    /// Where the budget is counted when it is not this store's alone (the workers of one relay share it): a ticket
    /// is recorded only with a grant from it, as well as room here. nil: the store's own entries are the count.
    private let grants: (any ZeroRTTGrantCounter)?
    /// Expired entries removed per `issue` beyond the one that makes room: enough to drain any backlog while
    /// tickets are issued, few enough that no call does more than constant work.
    private static let purgePerIssue = 8

    /// A store of at most `capacity` entries, each kept `windowSeconds` after its ticket was issued; `serialize`
    /// runs each access (pass a lock's critical section when several threads share the store). With `grants`
    /// (made for `capacity` grants of `windowSeconds` × 1000 ms, taken at `now()` × 1000) the budget is that
    /// counter's, shared with other processes' stores: each ticket recorded takes one.
    package init(
        capacity: Int, windowSeconds: Int64, serialize: @escaping @Sendable (() -> Void) -> Void = { $0() },
        grants: ZeroRTTGrantCounterMaker? = nil
    ) {
        self.capacity = max(1, capacity)
        self.window = max(1, windowSeconds)
        self.grants = grants?(self.capacity, self.window * 1000)
        self.serialize = serialize
    }

    private func read<T>(_ body: (State) -> T) -> T {
        var result: T?
        serialize { result = body(state) }
        return result!
    }

    /// Entries held (expired ones included until they leave).
    package var count: Int { read { $0.entries.count } }
    package var counters: Counters { read(\.counters) }
    /// Entries live in this process only: a restarted server knows none of the tickets issued before.
    package var outlivesProcess: Bool { false }
    package var rememberedSince: Int64? { nil }

    /// The server issued `ticket`: reserves its entry until its 0-RTT window ends. False when the budget is spent
    /// (the ticket then never carries 0-RTT).
    package func issue(_ ticket: TicketDigest) -> Bool {
        let current = now()
        var recorded = false
        serialize { recorded = record(ticket, current: current) }
        return recorded
    }

    /// A ClientHello offers `ticket` with early data: true (accept) once for a ticket recorded by `issue` whose
    /// window has not ended; false otherwise.
    package func redeem(_ ticket: TicketDigest) -> Bool {
        let current = now()
        var accepted = false
        serialize { accepted = use(ticket, current: current) }
        return accepted
    }

    /// `redeem(_:)`, decided at once: GnuTLS' recording start plays no part (only tickets issued since this store
    /// exists are recorded).
    package func admit(_ ticket: TicketDigest, recordingStart: Int64) -> ZeroRTTDecision {
        redeem(ticket) ? .accept : .refuse
    }

    package func count(_ tally: ZeroRTTTally) { serialize { state.counters.count(tally) } }

    private func record(_ ticket: TicketDigest, current: Int64) -> Bool {
        purge(current: current, limit: Self.purgePerIssue)
        guard state.entries.count < capacity, state.entries[ticket] == nil,
            grants.map({ $0.take(now: current * 1000) }) ?? true
        else {
            state.counters.overBudget += 1
            return false
        }
        state.entries[ticket] = Entry(deadline: current + window, used: false)
        state.order.append(ticket)
        state.counters.issued += 1
        return true
    }

    private func use(_ ticket: TicketDigest, current: Int64) -> Bool {
        guard let entry = state.entries[ticket] else {
            state.counters.unknown += 1
            return false
        }
        guard entry.deadline > current else {
            state.counters.expired += 1
            return false
        }
        guard !entry.used else {
            state.counters.duplicates += 1
            return false
        }
        state.entries[ticket]?.used = true
        state.counters.accepted += 1
        return true
    }

    /// Removes up to `limit` entries whose window ended, oldest first. A ticket removed here is unknown from then
    /// on, so its early data stays refused: removing an entry never lets a replay in.
    private func purge(current: Int64, limit: Int) {
        var removed = 0
        while removed < limit, let oldest = state.order.first {
            if let entry = state.entries[oldest], entry.deadline > current { return }
            _ = state.order.popFirst()
            state.entries[oldest] = nil
            removed += 1
        }
    }
}

/// The key of a ticket in an anti-replay store: the first 128 bits of the SHA-256 of what the ticket's MAC covers
/// (`GnuTLSAntiReplay.digest`; fixed size whatever the ticket's; tickets are sealed by the server, so a peer
/// cannot aim for another ticket's digest).
package struct TicketDigest: Hashable, Sendable {
    private let high: UInt64
    private let low: UInt64

    /// The digest whose bytes are the first 16 of `bytes` (zeros after a shorter input).
    package init(digestBytes bytes: [UInt8]) {
        func word(_ start: Int) -> UInt64 {
            (start..<(start + 8)).reduce(0) { $0 << 8 | UInt64($1 < bytes.count ? bytes[$1] : 0) }
        }
        high = word(0)
        low = word(8)
    }

    /// The 16 digest bytes in lowercase hexadecimal (a key in a shared store).
    package var hex: String {
        func digits(_ word: UInt64) -> String {
            let text = String(word, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }
        return digits(high) + digits(low)
    }
}
