import PTTTransport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// A trunk's floor messages on the wire (sans-IO): a forwarded request carries the member's identity and role, a
/// denial names the real holder or none and carries a retry-after time; a relay of the first trunk revision (no
/// revision field, no role, a holder always named) still reads and is read; garbage is a typed refusal.
@Suite("Trunk wire: floor requests with their role, denials with their holder")
struct TrunkFloorWireTests {
    static let alice = try! MemberIdentity("alice")
    static let bob = try! MemberIdentity("bob")

    /// Key/value fields after a type, as a relay of any revision writes them.
    static func message(_ type: UInt64, _ fields: [(UInt64, [UInt8])]) -> [UInt8] {
        var bytes: [UInt8] = []
        VarInt.encode(type, into: &bytes)
        for (key, value) in fields {
            VarInt.encode(key, into: &bytes)
            VarInt.encode(UInt64(value.count), into: &bytes)
            bytes += value
        }
        return bytes
    }

    static func uint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        VarInt.encode(value, into: &bytes)
        return bytes
    }

    @Test func floorMessagesReadBack() throws {
        let causes: [FloorDenyCause] = [
            .anotherMemberHasPermission, .retryAfter(.milliseconds(2500)), .receiveOnly, .noResources, .queueFull,
            .other,
        ]
        var messages: [TrunkMessage] = [
            .hello(relay: "relay-a"), .challenge(relay: "relay-b", nonce: [1, 2, 3]),
            .hello(relay: "relay-a", revision: 1), .challenge(relay: "relay-b", nonce: [4], revision: 1),
        ]
        for role in FloorRole.allCases {
            messages.append(.floorRequest(group: "g", user: Self.alice, role: role, priority: 7, emergency: true))
        }
        for cause in causes {
            for holder in [Self.bob, nil] {
                messages.append(.floorDenied(group: "g", user: Self.alice, holder: holder, cause: cause))
            }
        }
        for message in messages {
            #expect(try TrunkMessage(decoding: message.encoded()) == message, "\(message)")
        }
        // The role is written only for a receive-only member, the holder only when there is one.
        let talker = TrunkMessage.floorRequest(group: "g", user: Self.alice, priority: 0, emergency: false)
        #expect(talker.encoded() == Self.message(20, [(1, [0x67]), (2, Array("alice".utf8)), (8, [0]), (9, [0])]))
        let idle = TrunkMessage.floorDenied(group: "g", user: Self.alice, holder: nil, cause: .receiveOnly)
        #expect(idle.encoded() == Self.message(33, [(1, [0x67]), (2, Array("alice".utf8)), (16, [5])]))
    }

    @Test func aFirstRevisionRelayIsReadAndWrittenAsItExpects() throws {
        // Its hello and challenge carry no revision: 1.
        let hello = Self.message(1, [(3, Array("relay-a".utf8))])
        #expect(try TrunkMessage(decoding: hello) == .hello(relay: "relay-a", revision: 1))
        // Its floor request carries no role: a talker.
        let request = Self.message(20, [(1, [0x67]), (2, Array("bob".utf8)), (8, [3]), (9, [1])])
        #expect(
            try TrunkMessage(decoding: request)
                == .floorRequest(group: "g", user: Self.bob, role: .transmitAndReceive, priority: 3, emergency: true))
        // Its denial names the requester when nobody holds the floor: read as nobody; a real holder stays.
        let selfNamed = Self.message(33, [(1, [0x67]), (2, Array("bob".utf8)), (10, Array("bob".utf8)), (16, [6])])
        #expect(
            try TrunkMessage(decoding: selfNamed)
                == .floorDenied(group: "g", user: Self.bob, holder: nil, cause: .noResources))
        let held = Self.message(33, [(1, [0x67]), (2, Array("bob".utf8)), (10, Array("alice".utf8)), (16, [1])])
        #expect(
            try TrunkMessage(decoding: held)
                == .floorDenied(group: "g", user: Self.bob, holder: Self.alice, cause: .anotherMemberHasPermission))
        // Sent to it, a denial naming nobody names the requester (the field it requires); to a current peer, not.
        let none = TrunkMessage.floorDenied(group: "g", user: Self.bob, holder: nil, cause: .receiveOnly)
        #expect(
            none.forPeer(of: 1) == .floorDenied(group: "g", user: Self.bob, holder: Self.bob, cause: .receiveOnly))
        #expect(none.forPeer(of: TrunkMessage.revision) == none)
        #expect(
            try TrunkMessage(decoding: none.forPeer(of: 1).encoded()) == none, "and a current relay reads it back")
        // A newer relay's fields this revision does not know are skipped.
        let newer = Self.message(20, [(1, [0x67]), (2, Array("bob".utf8)), (8, [0]), (9, [0]), (40, [1, 2, 3])])
        #expect(
            try TrunkMessage(decoding: newer)
                == .floorRequest(group: "g", user: Self.bob, priority: 0, emergency: false))
        // A role this revision does not know is not granted knowingly: read as receive-only.
        let unknownRole = Self.message(20, [(1, [0x67]), (2, Array("bob".utf8)), (8, [0]), (9, [0]), (24, [9])])
        #expect(
            try TrunkMessage(decoding: unknownRole)
                == .floorRequest(group: "g", user: Self.bob, role: .receiveOnly, priority: 0, emergency: false))
    }

    @Test func garbageInAFloorMessageIsATypedRefusal() {
        let group: (UInt64, [UInt8]) = (1, [0x67])
        let bob: (UInt64, [UInt8]) = (2, Array("bob".utf8))
        let garbage: [[UInt8]] = [
            Self.message(20, [group, bob, (8, [0]), (9, [0]), (24, [0x40])]),  // a role that is no varint
            Self.message(20, [group, bob, (8, [0]), (9, [0]), (24, [1, 1])]),  // a role longer than its varint
            Self.message(20, [group, (8, [0]), (9, [0])]),  // no user
            Self.message(33, [group, bob]),  // no cause
            Self.message(33, [group, bob, (16, [4]), (18, Self.uint(86_400_001))]),  // retry-after past a day
            Self.message(33, [group, bob, (10, []), (16, [1])]),  // an empty holder
            Self.message(33, [group, bob, (10, [0x01]), (16, [1])]),  // a holder with a control character
            Self.message(1, [(3, Array("relay-a".utf8)), (25, [0xff])]),  // a truncated revision
            Self.message(2, [(3, Array("relay-b".utf8)), (4, [1]), (25, [])]),  // an empty revision
            Array(Self.message(20, [group, bob, (8, [0]), (9, [0]), (24, [1])]).dropLast()),  // cut short
        ]
        for bytes in garbage {
            do {
                let message = try TrunkMessage(decoding: bytes)
                Issue.record("read \(message) from \(bytes)")
            } catch {
                #expect(error.code == .trunkRefused, "\(error)")
            }
        }
        // The retry-after time is capped at a day when written.
        let long = TrunkMessage.floorDenied(group: "g", user: Self.bob, holder: nil, cause: .retryAfter(.seconds(1e6)))
        #expect(
            (try? TrunkMessage(decoding: long.encoded()))
                == .floorDenied(group: "g", user: Self.bob, holder: nil, cause: .retryAfter(.seconds(86_400))))
    }
}
