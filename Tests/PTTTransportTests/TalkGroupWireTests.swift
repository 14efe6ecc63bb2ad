import PTTTalkGroups
import PTTTransport
import Testing

@testable import PTTTalkGroups

/// The talk-group protocol's codecs: every message, the audio frame header and the wake ticket read back what was
/// written, and garbage gets a typed error (sans-IO).
@Suite("Talk-group wire formats")
struct TalkGroupWireTests {
    static let alice = try! MemberIdentity("alice")
    static let bob = try! MemberIdentity("bob")

    static let everyMessage: [TalkGroupMessage] = [
        .join(
            .init(
                group: "dispatch", user: alice, credential: [1, 2, 3],
                wakeAddress: try! WakeAddress(platform: .apns, token: "ab12"))),
        .join(.init(group: "g", user: bob, credential: [], wakeAddress: nil)),
        .catchUp(group: "dispatch", burst: 0x0102_0304_0506_0708, from: 12),
        .catchUp(group: "dispatch", burst: 0, from: 0),
        .requestFloor(group: "dispatch", priority: 0, emergency: false),
        .requestFloor(group: "dispatch", priority: 200, emergency: true),
        .releaseFloor(group: "dispatch"),
        .leave(group: "dispatch"),
        .joined(group: "dispatch", user: alice, current: nil),
        .joined(group: "dispatch", user: alice, current: .init(burst: 9, talker: bob, next: 40, ended: true)),
        .catchUpStarted(group: "dispatch", burst: 9, from: 0, next: 40),
        .floorGranted(group: "dispatch", burst: 9),
        .floorQueued(group: "dispatch", position: 2),
        .floorDenied(group: "dispatch", holder: bob, cause: .queueFull),
        .floorDenied(group: "dispatch", holder: nil, cause: .noResources),
        .floorTaken(group: "dispatch", burst: 9, talker: bob),
        .floorReleased(group: "dispatch", burst: 9, talker: bob, reason: .idle),
        .left(group: "dispatch"),
        .error(request: 2, code: .burstUnavailable, message: "gone", group: "dispatch"),
        .error(request: 99, code: .malformed, message: "", group: nil),
    ]

    @Test func everyMessageReadsBack() throws {
        for message in Self.everyMessage {
            #expect(try TalkGroupMessage(decoding: message.encoded()) == message, "\(message)")
        }
    }

    @Test func theWireFormIsTheDocumentedOne() throws {
        // catchUp: type 0x02; group (key 1, "g"); burst (key 6, 8 bytes); from (key 7, varint 5).
        let bytes = TalkGroupMessage.catchUp(group: "g", burst: 1, from: 5).encoded()
        #expect(bytes == [0x02, 0x01, 0x01, 0x67, 0x06, 0x08, 0, 0, 0, 0, 0, 0, 0, 1, 0x07, 0x01, 0x05])
        // Unknown fields are skipped: a newer phone's extra field (key 40) changes nothing.
        let extended = bytes + [40, 2, 0xAA, 0xBB]
        #expect(try TalkGroupMessage(decoding: extended) == .catchUp(group: "g", burst: 1, from: 5))
    }

    @Test func garbageGetsATypedError() {
        let cases: [([UInt8], TransportError.Code)] = [
            ([], .talkGroupMalformed),
            ([0x3F], .unknownMessage),
            ([0x02], .talkGroupMalformed),  // no group
            ([0x02, 0x01, 0x05, 0x67], .talkGroupMalformed),  // field runs past the end
            ([0x02, 0x01, 0x01, 0x67, 0x01, 0x01, 0x67, 0x07, 0x01, 0x00], .talkGroupMalformed),  // group twice
            ([0x02, 0x01, 0x01, 0x67, 0x07, 0x02, 0x05, 0x00], .talkGroupMalformed),  // from: not one varint
            ([0x02, 0x01, 0x01, 0xFF, 0x07, 0x01, 0x00], .talkGroupMalformed),  // group not UTF-8
            ([0x01, 0x01, 0x01, 0x67, 0x02, 0x00], .talkGroupMalformed),  // empty user
            (Array(repeating: 0x01, count: 5000), .talkGroupMalformed),  // too long
        ]
        for (bytes, code) in cases {
            #expect(throws: TransportError.self, "\(bytes.prefix(12))") { try TalkGroupMessage(decoding: bytes) }
            do {
                _ = try TalkGroupMessage(decoding: bytes)
            } catch {
                #expect(error.code == code, "\(bytes.prefix(12)): \(error)")
            }
        }
    }

    @Test func anOversizedWakeAddressIsRefusedByName() throws {
        let token = String(repeating: "a", count: WakeAddress.maximumTokenSize + 1)
        #expect(throws: TransportError.self) { try WakeAddress(platform: .fcm, token: token) }
        do { _ = try WakeAddress(platform: .fcm, token: token) } catch { #expect(error.code == .wakeAddressTooLarge) }
        // On the wire too: a join carrying it is refused with the same code.
        var bytes = TalkGroupMessage.join(.init(group: "g", user: Self.alice, credential: [], wakeAddress: nil))
            .encoded()
        bytes += [0x04, 0x01, 0x02, 0x05, 0x42, 0x01] + Array(token.utf8)  // platform fcm, token of 513 bytes
        do {
            _ = try TalkGroupMessage(decoding: bytes)
            Issue.record("an oversized push token was accepted")
        } catch {
            #expect(error.code == .wakeAddressTooLarge, "\(error)")
        }
    }

    @Test func identitiesAreBounded() {
        #expect(throws: TransportError.self) { try MemberIdentity("") }
        #expect(throws: TransportError.self) { try MemberIdentity(String(repeating: "x", count: 65)) }
        #expect(throws: TransportError.self) { try MemberIdentity("tab\there") }
        #expect((try? MemberIdentity(String(repeating: "x", count: 64))) != nil)
    }

    @Test func audioFrameHeaderReadsBack() throws {
        let header = AudioFrameHeader(
            burst: 0xDEAD_BEEF_0000_0001, sequence: 70_000, captureMilliseconds: 1_400, flags: 1)
        let frame = header.frame([9, 8, 7])
        #expect(frame.count == AudioFrameHeader.size + 3)
        #expect(frame[0] == 0xA1)
        #expect(try AudioFrameHeader(parsing: frame) == header)
        #expect(Array(frame[AudioFrameHeader.size...]) == [9, 8, 7])
    }

    @Test func garbageAudioHeadersAreRefused() {
        let good = AudioFrameHeader(burst: 5, sequence: 1, captureMilliseconds: 20).frame([1])
        var wrongKind = good
        wrongKind[0] = 0xA2
        var zeroBurst = good
        for index in 2..<10 { zeroBurst[index] = 0 }
        for bad in [[], Array(good.prefix(18)), wrongKind, zeroBurst, [0xA1]] {
            #expect(throws: TransportError.self, "\(bad)") { try AudioFrameHeader(parsing: bad) }
        }
    }

    @Test func wakeTicketReadsBackInBytesAndBase64URL() throws {
        let ticket = WakeTicket(
            group: "dispatch", burst: 0xFFFF_0000_1234_5678,
            relay: RelayIdentity(serverName: "relay.example", port: 4433, quicLBServerID: [0x0A, 0x0B]))
        #expect(try WakeTicket(decoding: ticket.encoded) == ticket)
        #expect(try WakeTicket(base64URL: ticket.base64URL) == ticket)
        #expect(!ticket.base64URL.contains("=") && !ticket.base64URL.contains("+") && !ticket.base64URL.contains("/"))
        #expect(ticket.encoded.count < 80)
        let plain = WakeTicket(group: "g", burst: 1, relay: RelayIdentity(serverName: "r", port: 1))
        #expect(try WakeTicket(decoding: plain.encoded) == plain)
    }

    @Test func garbageTicketsAreRefused() {
        let good = WakeTicket(group: "g", burst: 1, relay: RelayIdentity(serverName: "r", port: 1)).encoded
        let bad: [[UInt8]] = [
            [], [0x50, 0x57], [0x50, 0x57, 0x02] + good.dropFirst(3), Array(good.dropLast()), good + [0x01],
        ]
        for bytes in bad {
            #expect(throws: TransportError.self, "\(bytes)") { try WakeTicket(decoding: bytes) }
        }
        #expect(throws: TransportError.self) { try WakeTicket(base64URL: "!!!") }
    }

    @Test func errorCodesMapBothWays() {
        for code in TalkGroupErrorCode.allCases { #expect(TalkGroupErrorCode(code.transportCode) == code) }
        #expect(TalkGroupErrorCode(.idleTimeout) == nil)
    }
}
