import TransportCore

/// Admission of TCP connections that have not finished their handshake yet (TLS + QMux parameters): a budget per
/// source and a cap on all of them, so connections that never finish (Slowloris) cannot hold the relay's memory
/// and descriptors, nor lock out the clients that do finish.
///
/// A source over its budget is refused: it is the one flooding. When the cap is reached by many sources, a pending
/// handshake makes room for the newcomer instead (refusing newcomers would let 1024 idle sockets lock every TCP
/// client out for a whole handshake timeout): the oldest one of the source that has the most pending. A real
/// client has one handshake pending, so it is only made to leave when no source holds more than one, that is when
/// a flood comes from at least as many sources as the cap; then the longest-pending one goes. Evicting the oldest
/// overall instead shut out exactly the slow clients (a mobile one at 200 ms RTT: 0 of 15 handshakes) as soon as
/// silent connections from a few hundred sources, each inside its budget, kept the table full. Loop thread only.
package struct PendingHandshakes<Key: Hashable> {
    /// Where a connection comes from, for the per-source budget: the IPv4 address, or the /64 prefix of an IPv6
    /// one (a single host usually holds a whole /64). An IPv4-mapped IPv6 address counts as its IPv4 address: the
    /// source of the per-source ledgers, so every per-source count of a relay means one thing.
    package typealias Source = SourceLedger.Key

    /// What to do with a newly accepted connection.
    package enum Admission: Equatable {
        /// Start its handshake.
        case admit
        /// Start its handshake after closing this older pending one (the cap was reached).
        case admitAfterEvicting(Key)
        /// Close it at once: its source already has `perSource` handshakes pending.
        case refuse
    }

    package let limit: Int
    package let perSource: Int
    private var entries: [Key: (source: Source, sequence: UInt64)] = [:]
    /// Each source's pending keys, oldest first (at most `perSource` each).
    private var perSourceKeys: [Source: [Key]] = [:]
    /// The sources by how many handshakes they have pending, and the largest such count.
    private var sourcesByCount: [Int: Set<Source>] = [:]
    private var largestCount = 0
    /// Admission order, oldest first; entries no longer pending (or re-admitted) are skipped lazily.
    private var order: [(key: Key, sequence: UInt64)] = []
    private var orderHead = 0
    private var nextSequence: UInt64 = 0

    package init(limit: Int, perSource: Int) {
        self.limit = max(1, limit)
        self.perSource = max(1, perSource)
    }

    package var count: Int { entries.count }

    /// Whether `key` is pending (admitted, not yet removed or evicted).
    package func contains(_ key: Key) -> Bool { entries[key] != nil }

    package func count(from source: Source) -> Int { perSourceKeys[source]?.count ?? 0 }

    /// Entries in the admission order, skipped ones included (for tests: it stays bounded by the pending count).
    package var orderLength: Int { order.count - orderHead }

    /// Decides for a connection from `source`; on `.admit`/`.admitAfterEvicting` call `insert` once it started
    /// (and `remove` for the evicted one).
    package mutating func admission(for source: Source) -> Admission {
        if count(from: source) >= perSource { return .refuse }
        guard entries.count >= limit else { return .admit }
        return evictionCandidate().map { .admitAfterEvicting($0) } ?? .admit
    }

    /// The oldest pending key of the source with the most pending (of those, the one pending longest); the
    /// longest-pending key overall when every source has one.
    private mutating func evictionCandidate() -> Key? {
        guard largestCount > 1, let heaviest = sourcesByCount[largestCount] else { return oldest() }
        return heaviest.compactMap { perSourceKeys[$0]?.first }.min { entries[$0]!.sequence < entries[$1]!.sequence }
    }

    /// Records `key` (from `source`) as pending.
    package mutating func insert(_ key: Key, source: Source) {
        remove(key)
        nextSequence += 1
        entries[key] = (source, nextSequence)
        let before = count(from: source)
        perSourceKeys[source, default: []].append(key)
        recount(source, from: before, to: before + 1)
        order.append((key, nextSequence))
        compact()
    }

    /// The handshake of `key` ended (ready, failed, or the connection closed); no-op if it was not pending.
    /// Returns the source it was pending from (nil: it was not pending).
    @discardableResult
    package mutating func remove(_ key: Key) -> Source? {
        guard let entry = entries.removeValue(forKey: key) else { return nil }
        let before = count(from: entry.source)
        perSourceKeys[entry.source]?.removeAll { $0 == key }
        if perSourceKeys[entry.source]?.isEmpty == true { perSourceKeys[entry.source] = nil }
        recount(entry.source, from: before, to: before - 1)
        if entries.isEmpty {
            order.removeAll(keepingCapacity: true)
            orderHead = 0
        }
        return entry.source
    }

    /// Moves `source` between the count buckets.
    private mutating func recount(_ source: Source, from old: Int, to new: Int) {
        if old > 0 {
            sourcesByCount[old]?.remove(source)
            if sourcesByCount[old]?.isEmpty == true { sourcesByCount[old] = nil }
        }
        if new > 0 { sourcesByCount[new, default: []].insert(source) }
        if new > largestCount { largestCount = new }
        while largestCount > 0 && sourcesByCount[largestCount] == nil { largestCount -= 1 }
    }

    /// The longest-pending key.
    private mutating func oldest() -> Key? {
        while orderHead < order.count {
            let candidate = order[orderHead]
            if entries[candidate.key]?.sequence == candidate.sequence { return candidate.key }
            orderHead += 1
        }
        return nil
    }

    /// Drops the entries of `order` no longer pending once they are most of it, so its memory follows the
    /// pending count, not the number of connections accepted while one old handshake stays pending. Amortized
    /// O(1): it runs only when at least half of `order` goes.
    private mutating func compact() {
        guard order.count > 64, order.count > 2 * entries.count else { return }
        order = order[orderHead...].filter { entries[$0.key]?.sequence == $0.sequence }
        orderHead = 0
    }
}
