/// The last list of each group's members the fleet's store gave a group's home, sans-IO (times on MonotonicClock,
/// passed in): when the store misses a burst's read, the home wakes from this at once instead of from its own
/// members only. Bounded: at most `maximumGroups` lists and `maximumEntries` entries in all (the oldest lists go
/// first; about 40 MiB at the largest wake addresses, a few MiB at real push tokens), each kept `lifetime` (the
/// fleet's `memberLifetime`: the store itself forgets an entry no relay renewed in that time).
struct FleetMemberCache {
    static let maximumGroups = 1_024
    static let maximumEntries = 50_000

    let lifetime: UInt64
    private var lists: [String: (entries: [FleetMembers.Entry], at: UInt64)] = [:]
    /// Entries held, over every list.
    private(set) var entryCount = 0

    /// A cache whose lists expire `lifetime` nanoseconds after the store gave them.
    init(lifetime: UInt64) { self.lifetime = lifetime }

    /// Keeps `entries` as `group`'s list, given by the store at `now` (replacing the one before). A list longer
    /// than `maximumEntries` is not kept (and the group's older one is dropped: it is not the last good list).
    mutating func store(_ entries: [FleetMembers.Entry], for group: String, now: UInt64) {
        drop(group)
        guard entries.count <= Self.maximumEntries else { return }
        while lists.count >= Self.maximumGroups || entryCount + entries.count > Self.maximumEntries,
            let oldest = lists.min(by: { $0.value.at < $1.value.at })?.key
        {
            drop(oldest)
        }
        lists[group] = (entries, now)
        entryCount += entries.count
    }

    /// `group`'s list, when the store gave one less than `lifetime` before `now` (an older one is dropped).
    mutating func list(of group: String, now: UInt64) -> [FleetMembers.Entry]? {
        guard let list = lists[group] else { return nil }
        guard now &- list.at < lifetime else {
            drop(group)
            return nil
        }
        return list.entries
    }

    /// How many groups have a list.
    var count: Int { lists.count }

    private mutating func drop(_ group: String) {
        guard let old = lists.removeValue(forKey: group) else { return }
        entryCount -= old.entries.count
    }
}
