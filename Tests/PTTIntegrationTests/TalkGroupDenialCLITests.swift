import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// `connect --talk N` denied the floor prints the reject cause in words and names a holder only when someone holds
/// the floor: cause 5 for a `--receive-only` member, cause 6 from a relay whose fleet cannot confirm the group's
/// home (its store does not answer), each with `"holder": null` on an idle floor; cause 7 when the line is full,
/// naming the talker.
@Suite("Talk-group CLI: floor denials", .integration)
struct TalkGroupDenialCLITests {
    /// The phone's `denied` floor event, from its `--json` line.
    static func denial(_ output: String) throws -> [String: Any] {
        let floor = try #require(jsonObject(output)?["floor"] as? [[String: Any]], "\(output)")
        return try #require(floor.first { $0["event"] as? String == "denied" }, "\(floor)")
    }

    /// `user` asks `server` for the floor with `connect --talk 5`: the `denied` event it printed.
    static func talkDenied(
        _ scene: TalkGroupCLIScene, _ server: ChildServer, user: String
    ) async throws -> [String: Any] {
        let said = try await runProgram(
            Subprocess.cli, scene.phone(server) + ["--user", user, "--talk", "5", "--timeout", "20"])
        #expect(said.status == 0, "\(said.stderr)")
        #expect(jsonObject(said.stdout)?["frames_sent"] as? Int == 0)
        return try denial(said.stdout)
    }

    @Test(arguments: ["quic", "tcp"])
    func aReceiveOnlyMemberIsDeniedWithCause5(transport: String) async throws {
        let scene = try TalkGroupCLIScene("ro")
        defer { scene.remove() }
        let server = try await scene.startRelay(wakeHook: false)
        defer { server.stopNow() }
        let said = try await runProgram(
            Subprocess.cli,
            scene.phone(server, transport: transport) + ["--user", "radio", "--receive-only", "--talk", "5"])
        #expect(said.status == 0, "\(said.stderr)")
        let denial = try Self.denial(said.stdout)
        #expect(denial["reason"] as? String == "cause 5: receive only", "\(denial)")
        #expect(denial["holder"] is NSNull, "nobody holds the floor: \(denial)")
        #expect(jsonObject(said.stdout)?["frames_sent"] as? Int == 0)
    }

    @Test func aListenersTokenAdmitsItOnlyReceiveOnly() async throws {
        let scene = try TalkGroupCLIScene("ru")
        defer { scene.remove() }
        let users = scene.directory.appendingPathComponent("users").path
        try "radio r4d10 receive-only\n".write(toFile: users, atomically: true, encoding: .utf8)
        let server = try await scene.startRelay(wakeHook: false, ["--users", users])
        defer { server.stopNow() }
        let radio = scene.phone(server) + ["--user", "radio", "--token", "r4d10", "--talk", "5", "--timeout", "10"]
        // Asking to join as a talker with a listener's token: the join is refused (unauthenticated).
        let talking = try await runProgram(Subprocess.cli, radio)
        let floor = jsonObject(talking.stdout)?["floor"] as? [[String: Any]] ?? []
        #expect(
            floor.contains {
                ($0["event"] as? String) == "refused" && ($0["reason"] as? String ?? "").contains("admit")
            },
            "\(talking.stdout) \(talking.stderr)")
        #expect(!floor.contains { ($0["event"] as? String) == "granted" })
        // Receive-only: admitted, and its request denied with cause 5.
        let listening = try await runProgram(Subprocess.cli, radio + ["--receive-only"])
        #expect(listening.status == 0, "\(listening.stderr)")
        #expect(try Self.denial(listening.stdout)["reason"] as? String == "cause 5: receive only")
    }

    @Test func aRelayThatCannotConfirmTheHomeDeniesWithCause6AndNoHolder() async throws {
        let scene = try TalkGroupCLIScene("c6")
        defer { scene.remove() }
        // A fleet store nothing answers at (port 1: refused): the relay never confirms a group's home, so it grants
        // no floor (fail closed) and denies with no resources.
        let server = try await scene.startRelay(
            wakeHook: false, ["--fleet", "redis://127.0.0.1:1", "--relay-id", "solo"])
        defer { server.stopNow() }
        let denial = try await Self.talkDenied(scene, server, user: "bob")
        #expect(denial["reason"] as? String == "cause 6: no resources", "not 'bob holds the floor': \(denial)")
        #expect(denial["holder"] is NSNull, "\(denial)")
    }

    @Test func aRequestBeyondAFullLineIsDeniedWithCause7NamingTheTalker() async throws {
        let scene = try TalkGroupCLIScene("c7")
        defer { scene.remove() }
        let server = try await scene.startRelay(wakeHook: false)
        defer { server.stopNow() }
        let port = try TalkGroupCLIScene.port(of: server)
        @Sendable func phone(_ user: String) throws -> RecordedPhone {
            RecordedPhone(
                try TalkGroupPhone(
                    client: TCPFallbackTests.client(.quicOnly), relay: ServerAddress(host: "localhost", port: port),
                    configuration: .init(user: try MemberIdentity(user), group: "dispatch")))
        }
        // alice talks (a frame every 20 ms, so no end-of-media release); the relay's line of 8 fills behind her.
        let alice = try phone("alice")
        let line = try (1...8).map { try phone("waiting-\($0)") }
        let talking = try await withTimeout(.seconds(60)) {
            #expect(await alice.joined())
            try await alice.requestGrantedFloor()
            let talking = alice.talkUntilCancelled()
            for (index, waiting) in line.enumerated() {
                #expect(await waiting.joined())
                #expect(try await waiting.phone.requestFloor() == .queued(position: UInt64(index + 1)))
            }
            return talking
        }
        defer { talking.cancel() }
        let denial = try await Self.talkDenied(scene, server, user: "carol")
        #expect(denial["reason"] as? String == "cause 7: queue full", "\(denial)")
        #expect(denial["holder"] as? String == "alice", "\(denial)")
        for waiting in line { waiting.phone.stop() }
        alice.phone.stop()
    }
}
