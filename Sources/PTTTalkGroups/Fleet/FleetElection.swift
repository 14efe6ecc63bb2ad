/// Sans-IO: which relay of the fleet is each group's home (its only floor authority), from the views of the live
/// relays the store returns to this relay's heartbeats. No clock, no store: times (monotonic nanoseconds) and views
/// in, roles and role changes out, so it runs on a virtual clock in tests.
///
/// The rules, with `L` the liveness lifetime (how long the store keeps a relay live after its heartbeat):
/// - **A view** is the set of live relays the store answered to one heartbeat. The home of a group is the first of
///   the view in rendezvous order (`RendezvousOrder`).
/// - **A lease.** A heartbeat sent at `s` and answered keeps this relay live in the store until at least `s + L`;
///   the view it returned is trusted until then. Past it (no answer since: the store is slow, down, or cut off) the
///   relay *cannot confirm* it is anyone's home: it grants nothing, and drops the floors it held (`unconfirmed`).
///   Another relay takes over only once the store dropped this one, which is after `s + L`: never two floors.
/// - **A newcomer waits.** A relay whose registration is new (its first heartbeat, or one after its lease lapsed)
///   grants nothing before `L` has passed: a relay that ranks below it for a group may still hold a view from before
///   it arrived, valid at most `L` more.
/// - **A relay that died** drops out of the views once its entry expired (at most `L` after its last heartbeat):
///   the next relay in rendezvous order is home at its next heartbeat's answer, and grants at once (the dead relay's
///   lease ended before the store dropped it).
public struct FleetElection: Sendable {
    /// What this relay is for one group.
    public enum Role: Sendable, Equatable, CustomStringConvertible {
        /// The home, granting the group's floor.
        case home
        /// The home by the latest view, granting nothing yet: it joined (or rejoined) the fleet less than a lifetime
        /// ago.
        case arriving
        /// `relay` is the home: floor requests go there.
        case remote(String)
        /// The latest view is past its lease, and this relay ranks first in it: it cannot confirm it is the home,
        /// so it grants nothing.
        case unconfirmed
        /// No view yet (the store never answered).
        case unknown

        /// `home`, `arriving`, `remote:NAME`, `unconfirmed`, `unknown`.
        public var description: String {
            switch self {
            case .home: "home"
            case .arriving: "arriving"
            case .remote(let relay): "remote:\(relay)"
            case .unconfirmed: "unconfirmed"
            case .unknown: "unknown"
            }
        }
    }

    /// A group's role changed.
    public struct Change: Sendable, Equatable {
        /// The group.
        public let group: String
        /// Its role before.
        public let from: Role
        /// Its role now.
        public let to: Role
        /// Whether the floor the group had (wherever it was granted) is void: the home moved, or this relay stopped
        /// being a home that grants (an arrival's wait ending voids nothing: it granted nothing). The relay revokes
        /// the floor; talkers ask again.
        public var releasesFloor: Bool { from != to && !(from == .arriving && to == .home) }
    }

    /// This relay's name in the fleet.
    public let me: String
    /// How long the store keeps a relay live after a heartbeat (nanoseconds).
    public let lifetime: UInt64
    /// The live relays of the latest view (sorted), empty before the first.
    public private(set) var live: [String] = []
    /// When the heartbeat behind the latest view was sent (nil: no view yet).
    private var viewSentAt: UInt64?
    /// The lease the latest answered heartbeat gives: trusted until then.
    public private(set) var leaseEnd: UInt64 = 0
    /// Since when this relay has been live in the store without a gap (nil: not now).
    public private(set) var registeredSince: UInt64?
    /// The groups this relay serves, with the role last reported.
    private var groups: [String: Role] = [:]

    /// An election for relay `me`, with the store keeping relays live for `lifetime` nanoseconds.
    public init(me: String, lifetime: UInt64) {
        self.me = me
        self.lifetime = lifetime
    }

    /// The role of this relay for `group` at `now`.
    public func role(of group: String, now: UInt64) -> Role {
        guard viewSentAt != nil, let home = RendezvousOrder.home(group, over: live) else { return .unknown }
        if home != me { return .remote(home) }
        guard now < leaseEnd, let since = registeredSince else { return .unconfirmed }
        return now >= since &+ lifetime ? .home : .arriving
    }

    /// Whether this relay may grant `group`'s floor at `now`.
    public func mayGrant(_ group: String, now: UInt64) -> Bool { role(of: group, now: now) == .home }

    /// Starts following `group` (a member joined here); returns its role now.
    @discardableResult
    public mutating func follow(_ group: String, now: UInt64) -> Role {
        let role = role(of: group, now: now)
        groups[group] = role
        return role
    }

    /// Stops following `group` (its last member left).
    public mutating func unfollow(_ group: String) { groups[group] = nil }

    /// The groups followed.
    public var followed: [String] { groups.keys.sorted() }

    /// A heartbeat sent at `sentAt` was answered at `now` with the live relays `relays` (this one among them);
    /// `registered` when the store had no live entry for this relay before it (first heartbeat, or after a lapse).
    /// Returns the followed groups whose role changed.
    public mutating func viewArrived(
        _ relays: [String], sentAt: UInt64, registered: Bool, now: UInt64
    ) -> [Change] {
        if let previous = viewSentAt, sentAt < previous { return [] }  // an older answer than the view held
        if registered || registeredSince == nil || sentAt >= leaseEnd { registeredSince = now }
        viewSentAt = sentAt
        leaseEnd = sentAt &+ lifetime
        var names = Set(relays)
        names.insert(me)
        live = names.sorted()
        return tick(now: now)
    }

    /// The store did not answer a heartbeat (or answered what is not a view): the lease runs on, and lapses.
    public mutating func heartbeatFailed(now: UInt64) -> [Change] { tick(now: now) }

    /// Time passed: roles that changed without a new view (a lease lapsed, an arrival's wait ended).
    public mutating func tick(now: UInt64) -> [Change] {
        if now >= leaseEnd { registeredSince = nil }
        var changes: [Change] = []
        for (group, old) in groups.sorted(by: { $0.key < $1.key }) {
            let new = role(of: group, now: now)
            guard new != old else { continue }
            groups[group] = new
            changes.append(Change(group: group, from: old, to: new))
        }
        return changes
    }

    /// When a role may change with no new view: the lease's end, or an arrival's wait (nil: no such time).
    public func nextDeadline(now: UInt64) -> UInt64? {
        guard viewSentAt != nil else { return nil }
        var next: UInt64? = now < leaseEnd ? leaseEnd : nil
        if let since = registeredSince, now < since &+ lifetime { next = min(next ?? .max, since &+ lifetime) }
        return next
    }
}
