/// The tickets this relay claimed in the shared store lately (or saw claimed there, or has a claim in flight for):
/// a replay of one of them is refused at once, without a round trip to the store and without spending the relay's
/// budget — one ticket replayed 100,000 times costs one claim.
///
/// Bounded: at most `capacity` tickets, the oldest forgotten first (a forgotten ticket is asked of the store
/// again, which still refuses it: forgetting costs a round trip, never a replay). Memory: about 100 bytes per
/// ticket. Time: O(1) amortized per call. Sans-IO, not thread-safe (its owner locks).
package struct RecentTickets {
    package let capacity: Int
    /// Each remembered ticket and the number of its entry in `order` (a ticket removed and added again gets a new
    /// one, so its stale entry is told apart).
    private var members: [TicketDigest: UInt64] = [:]
    private var order = FIFOQueue<(ticket: TicketDigest, serial: UInt64)>()
    private var serial: UInt64 = 0

    package init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Tickets remembered now.
    package var count: Int { members.count }

    package func contains(_ ticket: TicketDigest) -> Bool { members[ticket] != nil }

    /// Remembers `ticket`; false when it was remembered already.
    package mutating func insert(_ ticket: TicketDigest) -> Bool {
        guard members[ticket] == nil else { return false }
        serial += 1
        members[ticket] = serial
        order.append((ticket, serial))
        // Forget the oldest beyond capacity; stale entries (removed tickets) go as they come first, and never
        // more than `capacity` of them wait.
        while members.count > capacity || order.count > 2 * capacity, let oldest = order.popFirst() {
            if members[oldest.ticket] == oldest.serial { members[oldest.ticket] = nil }
        }
        return true
    }

    /// Forgets `ticket` (its claim created nothing: it may be claimed again).
    package mutating func remove(_ ticket: TicketDigest) { members[ticket] = nil }
}
