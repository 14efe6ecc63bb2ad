/// One burst's read of its group's members from the fleet's store, sans-IO: what the wake hook gets from it, and
/// when. The home hands its hook a first list once — the store's answer when it comes within
/// `FleetConfiguration.memberReadDeadline`; else, at the deadline or as soon as the read failed, the group's last
/// list (`FleetMemberCache`) or none — and, when the store answers after that, its answer once more: the members
/// not handed yet go to the hook as a late addition. Nothing after the answer (or a failure) is handed.
struct FleetMemberRead {
    /// What the hook is handed.
    enum Hand: Equatable, Sendable {
        /// The store answered within the deadline.
        case onTime([FleetMembers.Entry])
        /// The store missed the deadline, is unreachable or answered what is not a list: the group's last list
        /// (nil: none within the members' lifetime; the home wakes its own members).
        case missed(cached: [FleetMembers.Entry]?)
        /// The store answered after the deadline: the members not handed yet are a late addition.
        case late([FleetMembers.Entry])

        /// The list to wake from (nil: this relay's own members only).
        var entries: [FleetMembers.Entry]? {
            switch self {
            case .onTime(let entries), .late(let entries): entries
            case .missed(let cached): cached
            }
        }

        /// Whether this is the second hand-over of the burst.
        var isLate: Bool { if case .late = self { true } else { false } }
    }

    /// The first list was handed.
    private(set) var handed = false
    /// The store answered or failed: nothing more comes.
    private(set) var finished = false

    /// The deadline passed: the cached list (`cached`, asked only now) goes to the hook, unless the store answered.
    mutating func deadlinePassed(cached: () -> [FleetMembers.Entry]?) -> Hand? {
        guard !handed, !finished else { return nil }
        handed = true
        return .missed(cached: cached())
    }

    /// The store answered `entries` (nil: it failed, is unreachable, or answered what is not a list).
    mutating func answered(_ entries: [FleetMembers.Entry]?, cached: () -> [FleetMembers.Entry]?) -> Hand? {
        guard !finished else { return nil }
        finished = true
        guard handed else {
            handed = true
            return entries.map(Hand.onTime) ?? .missed(cached: cached())
        }
        return entries.map(Hand.late)
    }
}
