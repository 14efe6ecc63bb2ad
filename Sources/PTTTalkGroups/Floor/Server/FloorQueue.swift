/// The members waiting for the floor, most urgent first, then highest priority, then first come: TS 24.380's queue
/// of floor requests.
struct FloorQueue<Member: Hashable & Sendable>: Sendable {
    struct Entry: Sendable {
        let member: Member
        var request: FloorRequest
        /// Order of arrival: an earlier request waits ahead of a later one of the same rank.
        let arrival: UInt64
    }

    private(set) var entries: [Entry] = []
    private var arrivals: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var members: [Member] { entries.map(\.member) }

    /// 1 for the next member to be granted.
    func position(of member: Member) -> Int? {
        entries.firstIndex { $0.member == member }.map { $0 + 1 }
    }

    func entry(of member: Member) -> Entry? {
        entries.first { $0.member == member }
    }

    /// Queues `member` with `request`, or, when it waits already, ranks it again by `request` keeping its arrival.
    mutating func enqueue(_ member: Member, _ request: FloorRequest) {
        let arrival: UInt64
        if let index = entries.firstIndex(where: { $0.member == member }) {
            arrival = entries.remove(at: index).arrival
        } else {
            arrivals &+= 1
            arrival = arrivals
        }
        let entry = Entry(member: member, request: request, arrival: arrival)
        let index = entries.firstIndex { Self.ranksAhead(entry, of: $0) } ?? entries.endIndex
        entries.insert(entry, at: index)
    }

    @discardableResult
    mutating func remove(_ member: Member) -> Entry? {
        guard let index = entries.firstIndex(where: { $0.member == member }) else { return nil }
        return entries.remove(at: index)
    }

    mutating func removeFirst() -> Entry? {
        entries.isEmpty ? nil : entries.removeFirst()
    }

    mutating func removeAll() -> [Entry] {
        defer { entries.removeAll() }
        return entries
    }

    private static func ranksAhead(_ entry: Entry, of other: Entry) -> Bool {
        if entry.request.urgency != other.request.urgency { return entry.request.urgency > other.request.urgency }
        if entry.request.priority != other.request.priority { return entry.request.priority > other.request.priority }
        return entry.arrival < other.arrival
    }
}
