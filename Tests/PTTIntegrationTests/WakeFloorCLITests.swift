import ChildProcesses
import Foundation
import TestSupport
import Testing

/// `connect --talk` started with a session file asks for the floor in its 0-RTT first flight, beside the join.
@Suite("Talking from a woken process on the command line", .serialized, .integration)
struct WakeFloorCLITests {
    @Test(arguments: ["quic", "tcp"])
    func aTalkerStartedWithASessionFileIsGrantedInItsZeroRTTWake(transport: String) async throws {
        let scene = try TalkGroupCLIScene("wf")
        defer { scene.remove() }
        let server = try await scene.startRelay(wakeHook: false)
        defer { server.stopNow() }
        let talk =
            scene.phone(server, transport: transport)
            + ["--user", "alice", "--talk", "5", "--session-file", scene.session(of: "alice")]
        // The first run has no session: a full handshake, the request after it. It saves the session.
        let cold = try await runProgram(Subprocess.cli, talk)
        #expect(cold.status == 0, "\(cold.stderr)")
        let coldFloor = try #require(jsonObject(cold.stdout)?["floor"] as? [[String: Any]], "\(cold.stdout)")
        #expect(coldFloor.map { $0["event"] as? String } == ["granted", "released"], "\(coldFloor)")

        // The next process wakes from the session: join and floor request in 0-RTT, the grant at 0.5-RTT.
        let woken = try await runProgram(Subprocess.cli, talk)
        #expect(woken.status == 0, "\(woken.stderr)")
        let said = try #require(jsonObject(woken.stdout), "\(woken.stdout) \(woken.stderr)")
        #expect(said["early_data"] as? String == "accepted", "\(said)")
        let floor = try #require(said["floor"] as? [[String: Any]])
        #expect(floor.map { $0["event"] as? String } == ["granted", "released"], "\(floor)")
        #expect(await server.stop().status == 0)
    }
}
