import Foundation
import PTTTransport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// The wake hook's JSON is written directly (not through `JSONSerialization`, which took tens of milliseconds for
/// 1,000 members): byte for byte what `JSONSerialization` with sorted keys writes, for awkward text too.
@Suite("Wake hook JSON (sans-IO)")
struct WakeRequestJSONTests {
    /// The object the hook's JSON stands for, serialized by Foundation (the reference).
    static func reference(_ request: WakeRequest) throws -> String {
        var relay: [String: Any] = ["server_name": request.relay.serverName, "port": Int(request.relay.port)]
        if let id = request.relay.quicLBServerID { relay["quic_lb_server_id"] = Hex.string(id) }
        var object: [String: Any] = [
            "group": request.group, "burst": Hex.string(BurstBuffer.bytes(of: request.burst)),
            "talker": request.talker.user, "relay": relay, "ticket": request.ticket.base64URL,
            "members": request.members.map { member in
                var object = [
                    "user": member.identity.user, "push_token": member.address.token,
                    "platform": member.address.platform.description,
                ]
                object["last_relay"] = member.lastRelay
                return object
            },
        ]
        if request.isLateAddition { object["late"] = true }
        return String(
            decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    static func request(group: String, members: Int, quicLB: [UInt8]?) throws -> WakeRequest {
        WakeRequest(
            group: group, burst: 0xfedc_ba98_7654_3210, talker: try MemberIdentity(#"tälker "t" /\ 📻"#),
            relay: RelayIdentity(serverName: "relay.example", port: 4433, quicLBServerID: quicLB),
            members: try (0..<members).map { index in
                WakeTarget(
                    identity: try MemberIdentity(index % 2 == 0 ? "unit-\(index)" : #"ü\"/\\\#(index)"#),
                    address: try WakeAddress(platform: index % 3 == 0 ? .apns : .fcm, token: #"t/"\\\#(index)"#),
                    lastRelay: index % 4 == 1 ? "relay-b:4433" : nil)
            })
    }

    @Test(arguments: [0, 1, 7, 1_000])
    func matchesFoundationsSortedKeysOutput(members: Int) throws {
        let request = try Self.request(
            group: "dispatch", members: members, quicLB: members % 2 == 1 ? [0xAB, 0x01] : nil)
        #expect(ExecWakeSender.json(request) == (try Self.reference(request)))
    }

    /// A burst's late addition (the fleet's store answered after its deadline) says so with `"late":true`.
    @Test func aLateAdditionSaysSo() throws {
        var request = try Self.request(group: "dispatch", members: 3, quicLB: nil)
        request.isLateAddition = true
        let written = ExecWakeSender.json(request)
        #expect(written == (try Self.reference(request)))
        #expect(written.contains(#""group":"dispatch","late":true,"members":["#))
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any]
        #expect(parsed?["late"] as? Bool == true)
    }

    @Test func escapesControlCharactersAndQuotesAsFoundationDoes() throws {
        let group = "a\"b\\c/d\u{08}\u{0C}\n\r\t\u{01}\u{1F}\u{7F}é"
        let request = try Self.request(group: group, members: 2, quicLB: nil)
        let written = ExecWakeSender.json(request)
        #expect(written == (try Self.reference(request)))
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any]
        #expect(parsed?["group"] as? String == group)
    }
}
