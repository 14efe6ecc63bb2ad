import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

/// Two relays of one fleet as child processes (`serve --talk-groups --fleet redis://... --relay-id`) with the CLI
/// phones: one home per group, the other relay grants nothing for it, and the group re-homes when its home is
/// killed.
@Suite("Fleet on the command line", .serialized, .integration)
struct FleetCLITests {
    static func relay(
        _ name: String, store: UInt16, directory: URL, extra: [String] = []
    ) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path, "--talk-groups",
                "--relay-id", name, "--events",
            ] + (extra.contains("--fleet") ? [] : ["--fleet", "redis://127.0.0.1:\(store)"]) + extra)
    }

    /// A CLI phone of `user` in `group` on `relay` (`--talk N` or `--listen S`, as `role` says): its output.
    static func phone(_ relay: ChildServer, user: String, group: String, _ role: [String]) async throws -> String {
        try await runProgram(
            Subprocess.cli,
            [
                "connect", relay.address, "--ca", Fixtures.ca, "--server-name", "localhost", "--group", group,
                "--user", user, "--json",
            ] + role
        ).stdout
    }

    /// The floor events of a phone that talked `frames` frames.
    static func talk(_ relay: ChildServer, user: String, group: String, frames: Int) async throws -> [String] {
        let said = try await phone(relay, user: user, group: group, ["--talk", "\(frames)"])
        let floor = jsonObject(said)?["floor"] as? [[String: Any]] ?? []
        return floor.compactMap { $0["event"] as? String }
    }

    /// The first line of `relay`'s output (within `limit`) for which `condition` holds.
    static func line(of relay: ChildServer, within limit: Duration, where condition: (String) -> Bool) async -> String?
    {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            guard let line = await relay.line(startingWith: "{", within: deadline - ContinuousClock.now) else {
                return nil
            }
            if condition(line) { return line }
        }
        return nil
    }

    @Test func onlyTheHomeGrantsAndTheNextTakesOverWhenItIsKilled() async throws {
        let redis = try await RedisTestServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-fleet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await Self.relay("relay-a", store: redis.port, directory: directory)
        defer { a.stopNow() }
        let b = try await Self.relay("relay-b", store: redis.port, directory: directory)
        defer { b.stopNow() }
        let both = "{\"event\":\"fleet\",\"relays\":[\"relay-a\",\"relay-b\"]}"
        #expect(await b.line(startingWith: both, within: .seconds(10)) != nil, "relay-b sees both")
        let group = try #require(
            (0..<1000).lazy.map { "fleet-\($0)" }.first {
                RendezvousOrder.home($0, over: ["relay-a", "relay-b"]) == "relay-a"
            })
        // A newcomer grants nothing for a lifetime (600 ms): wait until relay-a says it is the home.
        let listener = Task { try await Self.phone(a, user: "listener", group: group, ["--listen", "30"]) }
        defer { listener.cancel() }
        let homeAtA = await Self.line(of: a, within: .seconds(10)) { line in
            line.hasPrefix("{\"event\":\"home\"") && line.contains("\"group\":\"\(group)\"")
                && line.contains("\"role\":\"home\"")
        }
        #expect(homeAtA != nil, "relay-a is the group's home")
        // A contested floor from both relays at once: the home decides both (relay-b forwards its member's request
        // on the trunk, or denies it while no trunk reaches the home); one grant at a time, the other waits in line.
        async let atB = Self.talk(b, user: "bob", group: group, frames: 5)
        async let atA = Self.talk(a, user: "alice", group: group, frames: 5)
        let (fromB, fromA) = try await (atB, atA)
        // (A phone still joined also sees the other's grant, "taken", and its release.)
        #expect([fromA, fromB].allSatisfy { $0.contains("granted") || $0 == ["denied"] }, "\(fromA) \(fromB)")
        #expect(fromA.contains("granted") || fromB.contains("granted"), "\(fromA) \(fromB)")

        // relay-a is killed: relay-b becomes the home once relay-a's liveness expired in the store.
        let clock = ContinuousClock()
        a.kill()
        let killed = clock.now
        // relay-b follows the group once a member joined there.
        let bobListens = Task { try await Self.phone(b, user: "carol", group: group, ["--listen", "5"]) }
        defer { bobListens.cancel() }
        let home = await Self.line(of: b, within: .seconds(10)) { line in
            line.hasPrefix("{\"event\":\"home\"") && line.contains("\"group\":\"\(group)\"")
                && line.contains("\"role\":\"home\"")
        }
        #expect(home != nil, "relay-b took the group over")
        print("measure: relay-b home of \(group) \(clock.now - killed) after relay-a's SIGKILL (CLI, loaded machine)")
        #expect(try await Self.talk(b, user: "bob", group: group, frames: 5) == ["granted", "released"])
    }

    @Test func badFleetOptionsAreRefusedBeforeAnythingStarts() async throws {
        let serve = [
            "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            "--talk-groups",
        ]
        try await expectCLIRefuses(serve + ["--fleet", "http://127.0.0.1:6379"], says: "--fleet http://")
        try await expectCLIRefuses(serve + ["--fleet", "redis://user@127.0.0.1"], says: "authentication")
        try await expectCLIRefuses(serve + ["--fleet", "redis://127.0.0.1:99999"], says: "bad Redis port")
        try await expectCLIRefuses(
            serve + ["--fleet", "redis://127.0.0.1", "--relay-id", "two words"], says: "printable ASCII")
        try await expectCLIRefuses(
            serve + ["--fleet", "redis://127.0.0.1", "--workers", "2"],
            says: "--fleet with --workers needs --trunk-listen")
        try await expectCLIRefuses(
            serve + ["--fleet", "redis://127.0.0.1", "--workers", "2", "--trunk-listen", "127.0.0.1:65535"],
            says: "PORT + 2 × --workers - 1 passes 65535")
        try await expectCLIRefuses(
            serve + [
                "--fleet", "redis://127.0.0.1", "--workers", "2", "--relay-id", String(repeating: "r", count: 62),
            ],
            says: "1 to 64 printable ASCII")
        try await expectCLIRefuses(
            Array(serve.dropLast()) + ["--fleet", "redis://127.0.0.1"], says: "--fleet is an option of --talk-groups")
    }
}
