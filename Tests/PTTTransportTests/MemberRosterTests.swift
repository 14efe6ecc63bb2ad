import PTTTransport
import Testing

@testable import PTTTalkGroups

/// Members as users on a virtual clock: presence and its time, replacement by a second connection, expiry, who is
/// woken (sans-IO, no wall clock).
@Suite("Membership and presence (sans-IO)")
struct MemberRosterTests {
    static let s: UInt64 = 1_000_000_000
    static let alice = try! MemberIdentity("alice")
    static let bob = try! MemberIdentity("bob")
    static let apns = try! WakeAddress(platform: .apns, token: "00ff")

    @Test func aMemberStaysAMemberWhileAwayWithItsPresenceAndTime() throws {
        var roster = MemberRoster(lifetime: 3600 * Self.s, maximumPerGroup: 10)
        let first = TransportConnection.ID.next()
        _ = try roster.join(Self.alice, group: "g", wakeAddress: Self.apns, connection: first, now: 10 * Self.s)
        #expect(roster.member(Self.alice)?.presence == .connected)
        #expect(roster.toWake(in: "g").isEmpty, "a connected member is not woken")

        let suspended = roster.disconnected(Self.alice, connection: first, clean: true, now: 20 * Self.s)
        #expect(suspended == .suspended)
        #expect(roster.member(Self.alice)?.since == 20 * Self.s)
        #expect(roster.toWake(in: "g").map(\.identity) == [Self.alice])

        let second = TransportConnection.ID.next()
        _ = try roster.join(Self.alice, group: "g", wakeAddress: Self.apns, connection: second, now: 30 * Self.s)
        let lost = roster.disconnected(Self.alice, connection: second, clean: false, now: 40 * Self.s)
        #expect(lost == .unreachable)
        #expect(roster.members(of: "g").map(\.presence) == [.unreachable])
    }

    @Test func aSecondConnectionReplacesTheFirst() throws {
        var roster = MemberRoster(lifetime: 3600 * Self.s, maximumPerGroup: 10)
        let first = TransportConnection.ID.next()
        let second = TransportConnection.ID.next()
        let joined = try roster.join(Self.alice, group: "g", wakeAddress: nil, connection: first, now: 0)
        #expect(joined.replaced == nil)
        let rejoined = try roster.join(Self.alice, group: "g", wakeAddress: nil, connection: second, now: 1)
        #expect(rejoined.replaced == first)
        // The replaced connection's end changes nothing: the user is connected on the new one.
        let replacedEnd = roster.disconnected(Self.alice, connection: first, clean: false, now: 2)
        #expect(replacedEnd == nil)
        #expect(roster.member(Self.alice)?.presence == .connected)
        #expect(roster.member(Self.alice)?.connection == second)
        #expect(roster.members(of: "g").count == 1)
    }

    @Test func joiningAnotherGroupMoves() throws {
        var roster = MemberRoster(lifetime: 3600 * Self.s, maximumPerGroup: 10)
        let connection = TransportConnection.ID.next()
        _ = try roster.join(Self.alice, group: "a", wakeAddress: nil, connection: connection, now: 0)
        let moved = try roster.join(Self.alice, group: "b", wakeAddress: nil, connection: connection, now: 1)
        #expect(moved.movedFrom == "a" && moved.replaced == nil)
        #expect(roster.members(of: "a").isEmpty && roster.members(of: "b").count == 1)
    }

    @Test func membershipExpiresOnlyWhileAway() throws {
        var roster = MemberRoster(lifetime: 100 * Self.s, maximumPerGroup: 10)
        let a = TransportConnection.ID.next()
        let b = TransportConnection.ID.next()
        _ = try roster.join(Self.alice, group: "g", wakeAddress: Self.apns, connection: a, now: 0)
        _ = try roster.join(Self.bob, group: "g", wakeAddress: Self.apns, connection: b, now: 0)
        roster.disconnected(Self.alice, connection: a, clean: true, now: 50 * Self.s)
        let early = roster.expire(now: 149 * Self.s)
        #expect(early.isEmpty)
        let due = roster.expire(now: 150 * Self.s)
        #expect(due.map(\.identity) == [Self.alice])
        let later = roster.expire(now: 10_000 * Self.s)
        #expect(later.isEmpty, "a connected member never expires")
        #expect(roster.members(of: "g").map(\.identity) == [Self.bob])
    }

    @Test func aDeadWakeAddressMakesTheMemberUnreachableAndUnwoken() throws {
        var roster = MemberRoster(lifetime: 3600 * Self.s, maximumPerGroup: 10)
        let a = TransportConnection.ID.next()
        _ = try roster.join(Self.alice, group: "g", wakeAddress: Self.apns, connection: a, now: 0)
        let whileConnected = roster.undeliverable(Self.alice, now: 1)
        #expect(!whileConnected, "not while connected")
        roster.disconnected(Self.alice, connection: a, clean: true, now: 2)
        let whileAway = roster.undeliverable(Self.alice, now: 3)
        #expect(whileAway)
        #expect(roster.member(Self.alice)?.presence == .unreachable)
        #expect(roster.toWake(in: "g").isEmpty)
    }

    @Test func aFullGroupRefusesWithNoResourcesAndLeavingFreesAPlace() throws {
        var roster = MemberRoster(lifetime: 3600 * Self.s, maximumPerGroup: 1)
        _ = try roster.join(Self.alice, group: "g", wakeAddress: nil, connection: .next(), now: 0)
        do {
            _ = try roster.join(Self.bob, group: "g", wakeAddress: nil, connection: .next(), now: 0)
            Issue.record("a full group took a member")
        } catch {
            #expect(error.code == .noResources)
        }
        #expect(roster.member(Self.bob) == nil, "a refused join holds nothing")
        let elsewhere = roster.leave(Self.alice, group: "other")
        #expect(elsewhere == nil)
        let left = roster.leave(Self.alice, group: "g")
        #expect(left != nil)
        _ = try roster.join(Self.bob, group: "g", wakeAddress: nil, connection: .next(), now: 0)
    }
}
