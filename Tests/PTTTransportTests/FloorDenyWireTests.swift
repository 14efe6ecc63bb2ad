import PTTTalkGroups
import PTTTransport
import Testing

@testable import PTTTalkGroups

/// `floor denied` on the wire (sans-IO): every reject cause with and without a holder reads back, the holder is
/// written only when there is one, a retry-after denial carries its time, the code → cause table is the one the
/// floor server's causes print with, a first-revision denial still reads, and garbage gets a typed error. With the
/// join's floor role and protocol revision.
@Suite("Talk-group wire: floor denials and roles")
struct FloorDenyWireTests {
    static let bob = try! MemberIdentity("bob")
    static let causes: [FloorDenyCause] = [
        .anotherMemberHasPermission, .retryAfter(.milliseconds(2500)), .receiveOnly, .noResources, .queueFull, .other,
    ]

    @Test func everyCauseReadsBackWithAndWithoutAHolder() throws {
        for cause in Self.causes {
            for holder in [Self.bob, nil] {
                let message = TalkGroupMessage.floorDenied(group: "g", holder: holder, cause: cause)
                #expect(try TalkGroupMessage(decoding: message.encoded()) == message, "\(message)")
            }
        }
    }

    @Test func theHolderIsWrittenOnlyWhenThereIsOne() {
        // Type 0x45 (a two-byte varint: 40 45); group (key 1, "g"); cause (key 16 = 0x10, 6). No talker field (key 10).
        #expect(
            TalkGroupMessage.floorDenied(group: "g", holder: nil, cause: .noResources).encoded()
                == [0x40, 0x45, 0x01, 0x01, 0x67, 0x10, 0x01, 0x06])
        // With a holder: talker (key 10 = 0x0A, "bob") before the cause.
        #expect(
            TalkGroupMessage.floorDenied(group: "g", holder: Self.bob, cause: .queueFull).encoded()
                == [0x40, 0x45, 0x01, 0x01, 0x67, 0x0A, 0x03, 0x62, 0x6F, 0x62, 0x10, 0x01, 0x07])
        // Retry-after: cause 4 and the time in milliseconds (key 26 = 0x1A, varint 2500 = 0x49C4).
        #expect(
            TalkGroupMessage.floorDenied(group: "g", holder: nil, cause: .retryAfter(.milliseconds(2500))).encoded()
                == [0x40, 0x45, 0x01, 0x01, 0x67, 0x10, 0x01, 0x04, 0x1A, 0x02, 0x49, 0xC4])
    }

    @Test func oneTableFromCodeToCause() {
        for cause in Self.causes {
            let time: Duration = if case .retryAfter(let time) = cause { time } else { .zero }
            #expect(FloorDenyCause(code: UInt64(cause.code), retryAfter: time) == cause)
            #expect("\(cause)" == "#\(cause.code) \(cause.meaning)")
        }
        // Codes this version does not name (#2, #3, a newer one) read as #255 other.
        for code: UInt64 in [0, 2, 3, 8, 254, 1_000] { #expect(FloorDenyCause(code: code) == .other, "\(code)") }
        #expect(FloorDenyCause(code: 4) == .retryAfter(.zero), "a retry-after without its time")
        #expect(FloorDenyCause.noResources.meaning == "no resources")
        #expect(FloorDenyCause.queueFull.meaning == "queue full")
    }

    @Test func aFirstRevisionDenialStillReads() throws {
        // A relay of revision 1 always named a holder (the requester when nobody held the floor), and a phone of
        // revision 1 sent no cause before causes existed: #1.
        let named: [UInt8] = [0x40, 0x45, 0x01, 0x01, 0x67, 0x0A, 0x03, 0x62, 0x6F, 0x62]
        #expect(
            try TalkGroupMessage(decoding: named)
                == .floorDenied(group: "g", holder: Self.bob, cause: .anotherMemberHasPermission))
        // A cause 4 without its time: retry after zero; an unknown cause: other.
        #expect(
            try TalkGroupMessage(decoding: [0x40, 0x45, 0x01, 0x01, 0x67, 0x10, 0x01, 0x04])
                == .floorDenied(group: "g", holder: nil, cause: .retryAfter(.zero)))
        #expect(
            try TalkGroupMessage(decoding: [0x40, 0x45, 0x01, 0x01, 0x67, 0x10, 0x01, 0x03])
                == .floorDenied(group: "g", holder: nil, cause: .other))
    }

    @Test func joinsCarryTheRoleAndTheRevision() throws {
        let listener = TalkGroupMessage.JoinRequest(
            group: "g", user: Self.bob, credential: [], wakeAddress: nil, role: .receiveOnly)
        #expect(listener.revision == TalkGroupMessage.revision)
        let bytes = TalkGroupMessage.join(listener).encoded()
        // group, user, role (key 24 = 0x18, 1), revision (key 25 = 0x19, 2).
        #expect(bytes == [0x01, 0x01, 0x01, 0x67, 0x02, 0x03, 0x62, 0x6F, 0x62, 0x18, 0x01, 0x01, 0x19, 0x01, 0x02])
        #expect(try TalkGroupMessage(decoding: bytes) == .join(listener))
        // A first-revision join: no role (transmit and receive), revision 1; it reads back as written.
        let old = try TalkGroupMessage(decoding: [0x01, 0x01, 0x01, 0x67, 0x02, 0x03, 0x62, 0x6F, 0x62])
        guard case .join(let join) = old else {
            Issue.record("not a join: \(old)")
            return
        }
        #expect(join.role == .transmitAndReceive && join.revision == 1)
        #expect(try TalkGroupMessage(decoding: old.encoded()) == old)
    }

    @Test func garbageDenialsAndJoinsGetATypedError() {
        let join: [UInt8] = [0x01, 0x01, 0x01, 0x67, 0x02, 0x03, 0x62, 0x6F, 0x62]
        let deny: [UInt8] = [0x40, 0x45, 0x01, 0x01, 0x67]
        let cases: [[UInt8]] = [
            join + [0x18, 0x01, 0x02],  // role 2
            join + [0x18, 0x02, 0x01, 0x00],  // role: not one varint
            join + [0x19, 0x01, 0x00],  // revision 0
            join + [0x18, 0x01, 0x01, 0x18, 0x01, 0x01],  // role twice
            deny + [0x0A, 0x00, 0x10, 0x01, 0x01],  // an empty holder
            deny + [0x0A, 0x02, 0x61, 0x09, 0x10, 0x01, 0x01],  // a holder with a control character
            deny + [0x10, 0x02, 0x01, 0x00],  // cause: not one varint
            deny + [0x10, 0x01, 0x04, 0x1A, 0x04, 0x85, 0x26, 0x5C, 0x01],  // retry after more than a day
            deny + [0x10, 0x01, 0x04, 0x1A, 0x03, 0x49, 0xC4, 0x00],  // retry after: not one varint
            deny + [0x10, 0x05, 0x01],  // cause runs past the end
            [0x40, 0x45, 0x10, 0x01, 0x06],  // no group
        ]
        for bytes in cases {
            do {
                let read = try TalkGroupMessage(decoding: bytes)
                Issue.record("\(bytes) read as \(read)")
            } catch {
                #expect(error.code == .talkGroupMalformed, "\(bytes): \(error)")
            }
        }
    }
}
