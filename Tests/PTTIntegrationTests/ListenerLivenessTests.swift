import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// A QUIC listener that vanishes mid-burst (its process SIGKILLed) leaves the relay's live set within a second
/// (issue 33: it stayed a member and kept being sent audio for 30.2 s): its stack no longer acknowledges the audio,
/// so the relay probes it once and, with no answer, closes it.
@Suite("Relay: a vanished QUIC listener", .serialized, .integration)
struct ListenerLivenessTests {
    @Test func aKilledQUICListenerLeavesTheLiveSetWithinASecond() async throws {
        let scene = try TalkGroupCLIScene("ll")
        defer { scene.remove() }
        let relay = try await scene.startRelay(wakeHook: false, ["--events"])
        defer { _ = relay.stopNow() }
        let port = try TalkGroupCLIScene.port(of: relay)
        let bob = try SpawnedProgram(
            Subprocess.cli, scene.phone(relay, transport: "quic") + ["--user", "bob", "--listen", "60"])
        defer { bob.terminate(within: 5, with: SIGKILL) }
        func relayLine(_ matching: @escaping (String) -> Bool) async -> Bool {
            while let line = await relay.line(startingWith: "{", within: .seconds(20)) {
                if matching(line) { return true }
            }
            return false
        }
        #expect(await relayLine { $0.contains("\"joined\"") && $0.contains("\"bob\"") }, "bob joined")

        let alice = RecordedPhone(
            try TalkGroupPhone(
                client: TCPFallbackTests.client(.quicOnly), relay: ServerAddress(host: "localhost", port: port),
                configuration: .init(user: try MemberIdentity("alice"), group: "dispatch")))
        try await withTimeout {
            _ = try await alice.phone.link.nextReady()
            #expect(await alice.joined())
            try await alice.requestGrantedFloor()
        }
        let talking = alice.talkUntilCancelled()
        defer { talking.cancel() }
        try await Task.sleep(for: .milliseconds(500))  // the burst under way: bob acknowledges its frames
        let killed = ContinuousClock.now
        bob.signal(SIGKILL)
        #expect(
            await relayLine { $0.contains("\"presence\"") && $0.contains("\"bob\"") },
            "the relay noticed bob was gone")
        let took = ContinuousClock.now - killed
        print("a killed QUIC listener left the live set after \(took)")
        // Within a second on a quiet machine (printed above); asserted is what a loaded machine keeps: well before
        // the 30 s idle timeout that let a vanished listener stay a member (the second is a figure for the bench).
        #expect(took < .seconds(10), "long before the idle timeout (took \(took))")
    }
}
