import PTTTalkGroups
import PTTTransport
import TransportCore

/// The parsers of messages between a relay and its peers beyond the talk-group protocol: a trunk's control messages
/// (relay to relay, read before and after the fleet secret is proven) and a request stream's envelope. What a
/// parser accepts must encode back to something it reads as the same value.
enum RelayControlTargets {
    static func all() -> [ParserTarget] {
        [
            .roundTrip(
                name: "trunk-message", seeds: trunkSeeds, weight: 2,
                decode: { bytes throws(TransportError) in
                    try TrunkMessage(decoding: bytes)
                }, encode: { $0.encoded() }),
            .roundTrip(
                name: "request-envelope", seeds: envelopeSeeds,
                decode: { bytes throws(TransportError) in
                    try RequestEnvelope(decoding: bytes)
                }, encode: \.encoded),
        ]
    }

    static var trunkSeeds: [[UInt8]] {
        let alice = try! MemberIdentity("alice")
        let bob = try! MemberIdentity("bob")
        let messages: [TrunkMessage] = [
            .hello(relay: "relay-a"), .challenge(relay: "relay-b", nonce: Array(repeating: 0xA5, count: 32)),
            .proof(mac: Array(repeating: 0x5A, count: 32)), .welcome, .follow(group: "dispatch"),
            .unfollow(group: "dispatch"), .floorRequest(group: "dispatch", user: alice, priority: 200, emergency: true),
            .floorRelease(group: "dispatch", user: alice), .floorTaken(group: "g", burst: 1 << 40, talker: alice),
            .floorReleased(group: "g", burst: 9, talker: alice, reason: .revoked),
            .floorQueued(group: "g", user: bob, position: 3),
            .floorDenied(group: "g", user: bob, holder: alice, cause: .anotherMemberHasPermission),
            .floorRequest(group: "g", user: bob, role: .receiveOnly, priority: 0, emergency: false),
            .floorDenied(group: "g", user: bob, holder: nil, cause: .retryAfter(.seconds(3))),
        ]
        return messages.map { $0.encoded() }
    }

    static var envelopeSeeds: [[UInt8]] {
        [
            RequestEnvelope(id: 0, body: []).encoded, RequestEnvelope(id: 63, body: Array("join".utf8)).encoded,
            RequestEnvelope(id: 1 << 40, body: Array(repeating: 7, count: 100)).encoded,
        ]
    }
}
