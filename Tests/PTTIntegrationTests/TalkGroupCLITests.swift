import ChildProcesses
import Foundation
import TestSupport
import Testing

/// The talk-group relay and phones as operators and tests run them: `serve --talk-groups --wake-exec` and
/// `connect --user --group (--talk | --listen)` as child processes.
@Suite("Talk groups on the command line", .serialized, .integration)
struct TalkGroupCLITests {
    @Test(arguments: ["quic", "tcp"])
    func aSuspendedListenerWokenThroughTheHookHearsTheWholeBurst(transport: String) async throws {
        let scene = try TalkGroupCLIScene("tg")
        defer { scene.remove() }
        let server = try await scene.startRelay(["--events"])
        defer { server.stopNow() }
        let common = scene.phone(server, transport: transport)
        let bob = scene.bob
        // The listener joins once and suspends (its session saved), as an app the system suspended.
        let first = try await runProgram(Subprocess.cli, common + bob + ["--listen", "0.3"])
        #expect(first.status == 0, "\(first.stderr)")

        let talker = Task { try await runProgram(Subprocess.cli, common + ["--user", "alice", "--talk", "100"]) }
        let hook = try await scene.firstWake()
        #expect((hook["members"] as? [[String: Any]])?.first?["push_token"] as? String == "b0b")
        #expect(hook["talker"] as? String == "alice")
        let ticket = try #require(hook["ticket"] as? String)
        // The burst ends before the listener wakes (a late push): every frame comes from the relay's buffer, so a
        // stall of this loaded machine cannot make a live copy stale.
        let said = try await talker.value
        #expect(said.status == 0, "\(said.stderr)")

        let woken = try await runProgram(Subprocess.cli, common + bob + ["--ticket", ticket, "--listen", "3"])
        #expect(woken.status == 0, "\(woken.stderr)")
        let heard = try #require(jsonObject(woken.stdout), "\(woken.stdout) \(woken.stderr)")
        #expect(heard["early_data"] as? String == "accepted", "\(heard)")
        let bursts = try #require(heard["bursts"] as? [[String: Any]])
        #expect(bursts.count == 1, "\(heard)")
        #expect(bursts.first?["burst"] as? String == hook["burst"] as? String)
        #expect(bursts.first?["talker"] as? String == "alice")
        #expect(bursts.first?["frames"] as? Int == 100, "\(heard)")
        #expect(bursts.first?["missing"] as? Int == 0)
        #expect(bursts.first?["first_seq"] as? Int == 0)
        #expect((bursts.first?["first_audio_ms"] as? Double ?? 0) <= (bursts.first?["last_audio_ms"] as? Double ?? 0))

        let floor = try #require(jsonObject(said.stdout)?["floor"] as? [[String: Any]])
        #expect(floor.map { $0["event"] as? String } == ["granted", "released"], "\(floor)")
        #expect(floor.allSatisfy { $0["at_ms"] is Double })
        let (status, events) = await server.stop()
        #expect(status == 0)
        #expect(events.contains("\"event\":\"wake\"") && events.contains("\"event\":\"catch_up\""), "\(events)")
    }

    @Test func badOptionsAreRefusedBeforeAnythingStarts() async throws {
        let serve = ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey]
        try await expectCLIRefuses(
            serve + ["--burst-buffer", "5"], says: "--burst-buffer is an option of --talk-groups")
        try await expectCLIRefuses(
            serve + ["--talk-groups", "--burst-buffer", "0"], says: "--burst-buffer takes 1 to 300")
        try await expectCLIRefuses(serve + ["--talk-groups", "--wake-exec", " "], says: "--wake-exec needs a command")
        try await expectCLIRefuses(serve + ["--talk-groups", "--users", "/nonexistent"], says: "cannot read")
        let connect = ["connect", "127.0.0.1:9", "--ca", Fixtures.ca]
        try await expectCLIRefuses(connect + ["--user", "bob", "--group", "g"], says: "one of --talk N or --listen")
        try await expectCLIRefuses(connect + ["--talk", "5"], says: "option of the talk-group phone")
        try await expectCLIRefuses(
            connect + ["--user", "bob", "--group", "g", "--listen", "1", "--ticket", "garbage!"],
            says: "talk-group-malformed")
        try await expectCLIRefuses(
            connect + [
                "--user", "bob", "--group", "g", "--listen", "1", "--push-token", String(repeating: "a", count: 600),
            ],
            says: "wake-address-too-large")
        try await expectCLIRefuses(
            connect + ["--user", String(repeating: "u", count: 80), "--group", "g", "--listen", "1"],
            says: "user identity")
    }
}
