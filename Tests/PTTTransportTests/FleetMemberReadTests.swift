import PTTTransport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// A burst's read of its group's members when the fleet's store is slow or down (sans-IO, on a virtual clock): the
/// hook gets the answer in time, else the group's last list at once, and a late answer adds only the members not
/// handed yet; the last lists are bounded and expire.
@Suite("Fleet member reads: late answers and the last list (sans-IO)")
struct FleetMemberReadTests {
    static func user(_ name: String) -> MemberIdentity { try! MemberIdentity(name) }

    static func entry(_ name: String, on relay: String = "relay-b", token: String? = "t") -> FleetMembers.Entry {
        FleetMembers.Entry(
            user: user(name), relay: relay, group: "g", presence: .suspended,
            wake: token.map { try! WakeAddress(platform: .apns, token: $0) })
    }

    static let second: UInt64 = 1_000_000_000

    @Test func anAnswerInTimeIsHandedOnceAndTheDeadlineAfterItHandsNothing() {
        var read = FleetMemberRead()
        var asked = 0
        let hand = read.answered([Self.entry("a")]) {
            asked += 1
            return nil
        }
        #expect(hand == .onTime([Self.entry("a")]))
        #expect(read.deadlinePassed { [Self.entry("cached")] } == nil)
        #expect(asked == 0, "the cache is not consulted when the store answered")
    }

    @Test func aMissedDeadlineHandsTheLastListAtOnceThenTheLateAnswer() {
        var read = FleetMemberRead()
        #expect(read.deadlinePassed { [Self.entry("cached")] } == .missed(cached: [Self.entry("cached")]))
        #expect(read.deadlinePassed { [Self.entry("cached")] } == nil, "the deadline hands once")
        let late = read.answered([Self.entry("cached"), Self.entry("new")]) { nil }
        #expect(late == .late([Self.entry("cached"), Self.entry("new")]))
        #expect(late?.isLate == true)
        #expect(read.answered([Self.entry("again")]) { nil } == nil, "nothing after the answer")
    }

    @Test func aFailureBeforeTheDeadlineHandsTheLastListAtOnceAndNothingMore() {
        var read = FleetMemberRead()
        #expect(read.answered(nil) { [Self.entry("cached")] } == .missed(cached: [Self.entry("cached")]))
        #expect(read.deadlinePassed { nil } == nil)
        var empty = FleetMemberRead()
        let hand = empty.answered(nil) { nil }
        #expect(hand == .missed(cached: nil) && hand?.entries == nil, "no list: the home's own members")
    }

    @Test func aFailureAfterTheDeadlineAddsNothing() {
        var read = FleetMemberRead()
        #expect(read.deadlinePassed { nil } == .missed(cached: nil))
        #expect(read.answered(nil) { nil } == nil)
    }

    @Test func theLastListExpiresWithTheMembersLifetime() {
        var cache = FleetMemberCache(lifetime: 30 * Self.second)
        #expect(cache.list(of: "g", now: 0) == nil)
        cache.store([Self.entry("a")], for: "g", now: 10 * Self.second)
        #expect(cache.list(of: "g", now: 39 * Self.second) == [Self.entry("a")])
        cache.store([Self.entry("b")], for: "g", now: 20 * Self.second)  // a newer list replaces it
        #expect(cache.list(of: "g", now: 49 * Self.second) == [Self.entry("b")])
        #expect(cache.list(of: "g", now: 50 * Self.second) == nil)
        #expect(cache.count == 0 && cache.entryCount == 0, "an expired list is dropped")
        cache.store([], for: "quiet", now: 0)
        #expect(cache.list(of: "quiet", now: 1) == [], "an empty list is a list")
    }

    @Test func theLastListsAreBoundedOldestFirst() {
        var cache = FleetMemberCache(lifetime: 3_600 * Self.second)
        for index in 0..<(FleetMemberCache.maximumGroups + 10) {
            cache.store([Self.entry("a")], for: "g\(index)", now: UInt64(index + 1))
        }
        #expect(cache.count == FleetMemberCache.maximumGroups)
        #expect(cache.list(of: "g0", now: 5_000) == nil && cache.list(of: "g9", now: 5_000) == nil)
        #expect(cache.list(of: "g10", now: 5_000) != nil)

        let many = (0..<(FleetMemberCache.maximumEntries / 2)).map { Self.entry("m\($0)") }
        cache.store(many, for: "big-1", now: 6_000)
        cache.store(many, for: "big-2", now: 6_001)
        #expect(cache.entryCount <= FleetMemberCache.maximumEntries)
        #expect(cache.list(of: "big-1", now: 6_002)?.count == many.count)
        #expect(cache.list(of: "big-2", now: 6_002)?.count == many.count)
        cache.store(many, for: "big-3", now: 6_003)  // pushes out the oldest lists, big-1 among them
        #expect(cache.entryCount <= FleetMemberCache.maximumEntries)
        #expect(cache.list(of: "big-1", now: 6_004) == nil && cache.list(of: "big-3", now: 6_004) != nil)

        let tooMany = (0...FleetMemberCache.maximumEntries).map { Self.entry("x\($0)") }
        cache.store(tooMany, for: "big-2", now: 6_005)
        #expect(cache.list(of: "big-2", now: 6_006) == nil, "a list beyond the bound is not kept, nor its older one")
    }

    /// The late answer names the members the first request did not: never one twice in a burst.
    @Test func aLateAdditionNamesOnlyMembersNotHandedYet() {
        let talker = Self.user("talker")
        let local = [(identity: Self.user("here"), address: try! WakeAddress(platform: .apns, token: "h"))]
        let first = FleetWake.targets(
            talker: talker, me: "relay-a", local: local, connectedHere: [], group: "g",
            store: [Self.entry("cached")])
        #expect(first.map(\.identity.user) == ["cached", "here"])
        let late = FleetWake.targets(
            talker: talker, me: "relay-a", local: local, connectedHere: [], group: "g",
            store: [Self.entry("cached"), Self.entry("new"), Self.entry("talker")],
            excluding: Set(first.map(\.identity)))
        #expect(late.map(\.identity.user) == ["new"])
        #expect(late.first?.lastRelay == "relay-b")
    }
}
