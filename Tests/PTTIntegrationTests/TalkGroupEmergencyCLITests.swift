import ChildProcesses
import Foundation
import TestSupport
import Testing

/// `connect --talk N --emergency` acts: a talker mid-burst is pre-empted by a dispatcher's emergency request, the
/// dispatcher is granted at once, and both report it in their `floor` JSON (`revoked` with reason `preempted`,
/// `granted`), each event with `at_ms`.
@Suite("Talk-group CLI: emergency pre-emption", .integration)
struct TalkGroupEmergencyCLITests {
    @Test(arguments: ["quic", "tcp"])
    func anEmergencyRequestPreemptsTheTalker(transport: String) async throws {
        let scene = try TalkGroupCLIScene("em")
        defer { scene.remove() }
        let server = try await scene.startRelay(wakeHook: false, ["--events"])
        defer { server.stopNow() }
        let common = scene.phone(server, transport: transport, group: "fire")
        // 1,000 frames: 20 s of talk, far longer than the test waits; the emergency ends it.
        let talker = Task { try await runProgram(Subprocess.cli, common + ["--user", "alice", "--talk", "1000"]) }
        var aliceGranted = false
        while !aliceGranted, let line = await server.line(startingWith: "{", within: .seconds(20)) {
            aliceGranted = line.contains("\"granted\"") && line.contains("\"alice\"")
        }
        #expect(aliceGranted, "the relay granted alice")
        let dispatch = try await runProgram(
            Subprocess.cli, common + ["--user", "dispatch", "--talk", "5", "--priority", "200", "--emergency"])
        #expect(dispatch.status == 0, "\(dispatch.stderr)")
        let said = try await talker.value
        #expect(said.status == 0, "\(said.stderr)")

        let dispatchFloor = try #require(
            jsonObject(dispatch.stdout)?["floor"] as? [[String: Any]], "\(dispatch.stdout)")
        // The dispatcher hears alice's floor taken back, then its own grant: no queueing in between.
        #expect(
            dispatchFloor.prefix(2).map { $0["event"] as? String } == ["revoked", "granted"],
            "granted at once: \(dispatchFloor)")
        let aliceFloor = try #require(jsonObject(said.stdout)?["floor"] as? [[String: Any]], "\(said.stdout)")
        let revoked = aliceFloor.first { $0["event"] as? String == "revoked" }
        #expect(revoked?["reason"] as? String == "preempted", "\(aliceFloor)")
        #expect(aliceFloor.allSatisfy { $0["at_ms"] is Double })
        #expect(aliceFloor.contains { $0["event"] as? String == "taken" && $0["reason"] as? String == "dispatch" })
    }
}
