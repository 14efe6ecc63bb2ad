import PTTTalkGroups
import PTTTransport
import TransportCore

/// The talk-group protocol's parsers: control messages, audio frame headers and wake tickets (bytes and base64url).
/// What a parser accepts must encode back to something it reads as the same value.
enum TalkGroupTargets {
    static func all() -> [ParserTarget] {
        [
            .roundTrip(
                name: "talk-group-message", seeds: messageSeeds, weight: 2,
                decode: { bytes throws(TransportError) in try TalkGroupMessage(decoding: bytes) },
                encode: { $0.encoded() }),
            ParserTarget(name: "audio-frame-header", seeds: headerSeeds) { input, _ in
                do throws(TransportError) {
                    let header = try AudioFrameHeader(parsing: input)
                    return header.frame(Array(input[AudioFrameHeader.size...])) == input
                        ? .accepted : .rejected("\(header) does not write back the same frame")
                } catch {
                    return .rejected(error.description)
                }
            },
            ParserTarget(name: "wake-ticket", seeds: ticketSeeds) { input, random in
                do throws(TransportError) {
                    let ticket =
                        random.oneIn(4)
                        ? try WakeTicket(base64URL: String(decoding: input, as: UTF8.self))
                        : try WakeTicket(decoding: input)
                    return try WakeTicket(base64URL: ticket.base64URL) == ticket
                        ? .accepted : .rejected("\(ticket) does not read back")
                } catch {
                    return .rejected(error.description)
                }
            },
        ]
    }

    static var messageSeeds: [[UInt8]] {
        let alice = try! MemberIdentity("alice")
        let messages: [TalkGroupMessage] = [
            .join(
                .init(
                    group: "dispatch", user: alice, credential: Array("token".utf8),
                    wakeAddress: try! WakeAddress(platform: .apns, token: "80a1b2c3"))),
            .join(.init(group: "g", user: alice, credential: [], wakeAddress: nil, role: .receiveOnly)),
            .catchUp(group: "dispatch", burst: 0x1234_5678_9ABC_DEF0, from: 3),
            .requestFloor(group: "dispatch", priority: 7, emergency: true), .releaseFloor(group: "dispatch"),
            .leave(group: "dispatch"),
            .joined(group: "dispatch", user: alice, current: .init(burst: 9, talker: alice, next: 40, ended: false)),
            .catchUpStarted(group: "dispatch", burst: 9, from: 0, next: 40), .floorGranted(group: "g", burst: 9),
            .floorQueued(group: "g", position: 2),
            .floorDenied(group: "g", holder: alice, cause: .anotherMemberHasPermission),
            .floorDenied(group: "g", holder: nil, cause: .retryAfter(.milliseconds(2500))),
            .floorTaken(group: "g", burst: 9, talker: alice),
            .floorReleased(group: "g", burst: 9, talker: alice, reason: .idle), .left(group: "g"),
            .error(request: 2, code: .sequenceInFuture, message: "ask from 0", group: "g"),
        ]
        return messages.map { $0.encoded() }
    }

    static var headerSeeds: [[UInt8]] {
        [
            AudioFrameHeader(burst: 1, sequence: 0, captureMilliseconds: 0).frame([0]),
            AudioFrameHeader(burst: .max, sequence: .max, captureMilliseconds: 20, flags: 1).frame(
                Array(repeating: 7, count: 60)),
        ]
    }

    static var ticketSeeds: [[UInt8]] {
        [
            WakeTicket(group: "dispatch", burst: 42, relay: RelayIdentity(serverName: "relay.example", port: 4433))
                .encoded,
            WakeTicket(
                group: "g", burst: 1, relay: RelayIdentity(serverName: "r", port: 1, quicLBServerID: [1, 2, 3])
            ).encoded,
            Array(WakeTicket(group: "g", burst: 9, relay: RelayIdentity(serverName: "r", port: 443)).base64URL.utf8),
        ]
    }
}
