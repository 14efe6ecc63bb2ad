import PTTTransport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// Whom a group's home wakes for a burst, from its own members and the fleet's store (sans-IO), and the strict parse
/// of the store's member entries: a hostile store's answer is a typed error, never a member.
@Suite("Fleet-wide wake (sans-IO)")
struct FleetWakeTests {
    static func user(_ name: String) -> MemberIdentity { try! MemberIdentity(name) }
    static func address(_ token: String) -> WakeAddress { try! WakeAddress(platform: .apns, token: token) }

    /// A roster of `members` (name, presence, token) in group g, and one member of group h.
    static func roster(_ members: [(String, MemberPresence, String?)]) throws -> MemberRoster {
        var roster = MemberRoster(lifetime: 3_600_000_000_000, maximumPerGroup: 100)
        for (name, presence, token) in members {
            let connection = TransportConnection.ID.next()
            _ = try roster.join(user(name), group: "g", wakeAddress: token.map(address), connection: connection, now: 0)
            if presence != .connected {
                roster.disconnected(user(name), connection: connection, clean: presence == .suspended, now: 1)
            }
        }
        _ = try roster.join(user("other-group"), group: "h", wakeAddress: address("t4"), connection: .next(), now: 0)
        return roster
    }

    static func targets(_ roster: MemberRoster, store: [FleetMembers.Entry]?) -> [WakeTarget] {
        FleetWake.targets(
            talker: user("talker"), me: "relay-a", local: roster.toWake(in: "g"),
            connectedHere: roster.connected(in: "g"), group: "g", store: store)
    }

    static func stored(
        _ name: String, on relay: String, _ presence: MemberPresence, token: String?, group: String = "g"
    ) -> FleetMembers.Entry {
        FleetMembers.Entry(user: user(name), relay: relay, group: group, presence: presence, wake: token.map(address))
    }

    @Test func theHomeWakesEachMemberNotConnectedAnywhereOnce() throws {
        let roster = try Self.roster([
            ("here-asleep", .suspended, "t1"), ("here-awake", .connected, "t2"),
            ("moved-away", .suspended, "old"),  // its entry names relay-c now
            ("talker", .connected, "t3"), ("no-token", .unreachable, nil),
        ])
        let store = [
            Self.stored("here-asleep", on: "relay-a", .suspended, token: "t1"),  // this relay's own: local wins
            Self.stored("here-awake", on: "relay-b", .suspended, token: "stale"),  // connected here now
            Self.stored("moved-away", on: "relay-c", .suspended, token: "new"),
            Self.stored("there-asleep", on: "relay-b", .unreachable, token: "t5"),
            Self.stored("there-awake", on: "relay-b", .connected, token: "t6"),
            Self.stored("there-no-token", on: "relay-c", .suspended, token: nil),
            Self.stored("there-other-group", on: "relay-b", .suspended, token: "t7", group: "h"),
            Self.stored("gone-here", on: "relay-a", .suspended, token: "t8"),  // left here, deletion in flight
        ]
        let targets = Self.targets(roster, store: store)
        #expect(targets.map(\.identity.user) == ["here-asleep", "moved-away", "there-asleep"])
        #expect(targets.map(\.address.token) == ["t1", "new", "t5"])
        #expect(targets.map(\.lastRelay) == [nil, "relay-c", "relay-b"])

        // The store unreachable: this relay's own, as it knows them.
        #expect(Self.targets(roster, store: nil).map(\.identity.user) == ["here-asleep", "moved-away"])
        // The talker is never woken, wherever it is recorded.
        let talkerStored = [Self.stored("talker", on: "relay-b", .suspended, token: "x")]
        #expect(Self.targets(try Self.roster([]), store: talkerStored).isEmpty)
    }

    @Test func storeEntriesParseStrictlyAndGarbageIsATypedError() throws {
        let bob = Self.user("bob")
        let value = FleetMembers.value(
            relay: "relay-b", serverID: "0a0b", group: "night shift presence=connected", presence: .suspended,
            wake: try WakeAddress(platform: .fcm, token: "f:c:m"))
        let entry = try #require(FleetMembers.entry(bob, value))
        #expect(
            entry
                == Self.stored("bob", on: "relay-b", .suspended, token: nil, group: "night shift presence=connected")
                .with(
                    wake: try WakeAddress(platform: .fcm, token: "f:c:m")))
        #expect(
            FleetMembers.entry(bob, "relay=r sid= group=g presence=connected")
                == Self.stored("bob", on: "r", .connected, token: nil))
        for garbage in [
            "", "relay=r", "relay= sid= group=g presence=connected", "relay=r sid= group= presence=connected",
            "relay=r sid= group=g presence=asleep", "relay=r sid= group=g presence=suspended wake=apns",
            "relay=r sid= group=g presence=suspended wake=sms:123",
            "relay=r sid= group=g presence=suspended wake=apns:",
            "sid= relay=r group=g presence=connected", "relay=r sid= group=g", "relay=r sid= presence=connected",
            "relay=r sid= group=g presence=connected " + String(repeating: "x", count: 3000),
            "relay=r sid= group=\(String(repeating: "g", count: 65)) presence=connected",
        ] {
            #expect(FleetMembers.entry(bob, garbage) == nil, "\(garbage.prefix(80))")
        }
        let good = RESPValue.array([
            .bulk(Array("bob".utf8)), .bulk(Array("relay=r sid= group=g presence=suspended wake=apns:b0b".utf8)),
            .bulk(Array("gone".utf8)), .bulk([]),
        ])
        #expect(try FleetMembers.entries(good).map(\.user) == [bob])
        let bad: [RESPValue] = [
            .integer(1), .error("WRONGTYPE Operation against a key holding the wrong kind of value"), .array(nil),
            .array([.bulk(Array("bob".utf8))]), .array([.bulk(nil), .bulk([])]), .array([.integer(1), .bulk([])]),
            .array([.bulk([0xff]), .bulk(Array("relay=r sid= group=g presence=connected".utf8))]),
            .array([.bulk([]), .bulk(Array("relay=r sid= group=g presence=connected".utf8))]),
            .array([.bulk(Array("bob".utf8)), .bulk(Array("garbage".utf8))]),
        ]
        for reply in bad {
            #expect(throws: TransportError.self, "\(reply)") { try FleetMembers.entries(reply) }
            do {
                _ = try FleetMembers.entries(reply)
            } catch {
                #expect(error.code == .fleetStoreUnusable)
            }
        }
    }
}

extension FleetMembers.Entry {
    fileprivate func with(wake: WakeAddress) -> Self {
        var copy = self
        copy.wake = wake
        return copy
    }
}
