import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

/// Two relays of one fleet as child processes with trunks (`serve --talk-groups --fleet ... --trunk-listen
/// --fleet-secret`): `trunk` lines on --events, a talker on the relay that is not the group's home granted by the
/// home, and its listener on the other relay hearing the whole burst.
@Suite("Trunks on the command line", .serialized, .integration)
struct TrunkCLITests {
    static func relay(_ name: String, store: UInt16, directory: URL) async throws -> ChildServer {
        try await FleetCLITests.relay(
            name, store: store, directory: directory,
            extra: [
                "--trunk-listen", "127.0.0.1:0", "--fleet-secret",
                directory.appendingPathComponent("fleet.secret").path, "--trunk-ca", Fixtures.ca,
            ])
    }

    @Test func aTalkerOnTheOtherRelayIsGrantedByTheHomeAndHeardAcrossTheTrunk() async throws {
        let redis = try await RedisTestServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-trunk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(repeating: 0x42, count: 32).write(to: directory.appendingPathComponent("fleet.secret"))
        let a = try await Self.relay("relay-a", store: redis.port, directory: directory)
        defer { a.stopNow() }
        let b = try await Self.relay("relay-b", store: redis.port, directory: directory)
        defer { b.stopNow() }
        let up = await FleetCLITests.line(of: b, within: .seconds(20)) { line in
            line.hasPrefix("{\"event\":\"trunk\"") && line.contains("\"peer\":\"relay-a\"")
                && line.contains("\"state\":\"up\"")
        }
        #expect(up != nil, "relay-b reports the trunk to relay-a up")
        let group = try #require(
            (0..<1000).lazy.map { "trunk-\($0)" }.first {
                RendezvousOrder.home($0, over: ["relay-a", "relay-b"]) == "relay-a"
            })
        let listener = Task {
            try await FleetCLITests.phone(a, user: "listener", group: group, ["--listen", "8"])
        }
        let homeAtA = await FleetCLITests.line(of: a, within: .seconds(10)) { line in
            line.hasPrefix("{\"event\":\"home\"") && line.contains("\"group\":\"\(group)\"")
                && line.contains("\"role\":\"home\"")
        }
        #expect(homeAtA != nil, "relay-a is the group's home")
        // relay-b is not the home: its member's request goes over the trunk, and relay-a's grant comes back.
        #expect(try await FleetCLITests.talk(b, user: "bob", group: group, frames: 10) == ["granted", "released"])
        let heard = jsonObject(try await listener.value)
        let bursts = heard?["bursts"] as? [[String: Any]] ?? []
        #expect(bursts.count == 1, "\(String(describing: heard))")
        #expect(bursts.first?["talker"] as? String == "bob")
        #expect(bursts.first?["frames"] as? Int == 10 && bursts.first?["missing"] as? Int == 0, "\(bursts)")
    }

    /// The trunk secret derived from the ticket key, during a rotation: relay-a already has the new key file (the
    /// old one as `--previous-ticket-key`), relay-b still the old one; relay-a dials and relay-b admits it.
    @Test func aRelayRotatingItsTicketKeyKeepsItsTrunkToARelayStillOnTheOldKey() async throws {
        let redis = try await RedisTestServer.start()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-rotate-\(UUID().uuidString)")
        let (old, new) = (root.appendingPathComponent("old"), root.appendingPathComponent("new"))
        for directory in [old, new] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        defer { try? FileManager.default.removeItem(at: root) }
        let b = try await FleetCLITests.relay("relay-b", store: redis.port, directory: old)  // makes the old key
        defer { b.stopNow() }
        let a = try await FleetCLITests.relay(
            "relay-a", store: redis.port, directory: new,
            extra: ["--previous-ticket-key", old.appendingPathComponent("ticket.key").path])
        defer { a.stopNow() }
        let up = await FleetCLITests.line(of: b, within: .seconds(20)) { line in
            line.hasPrefix("{\"event\":\"trunk\"") && line.contains("\"peer\":\"relay-a\"")
                && (line.contains("\"state\":\"up\"") || line.contains("\"state\":\"refused\""))
        }
        #expect(up?.contains("\"state\":\"up\"") == true, "relay-b: \(up ?? "no trunk line")")
    }

    @Test func badTrunkOptionsAreRefusedBeforeAnythingStarts() async throws {
        let serve = [
            "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            "--talk-groups",
        ]
        let fleet = ["--fleet", "redis://127.0.0.1"]
        let short = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-short-\(UUID().uuidString)")
        try Data(repeating: 1, count: 7).write(to: short)
        defer { try? FileManager.default.removeItem(at: short) }
        try await expectCLIRefuses(serve + ["--trunk-listen", "127.0.0.1:0"], says: "--trunk-listen needs --fleet")
        try await expectCLIRefuses(serve + ["--fleet-secret", short.path], says: "--fleet-secret needs --fleet")
        // No shared secret at all: neither a fleet secret nor a ticket key nor a reset secret.
        try await expectCLIRefuses(serve + fleet + ["--trunk-listen", "127.0.0.1:0"], says: "--ticket-key FILE")
        try await expectCLIRefuses(serve + fleet, says: "--ticket-key FILE")
        try await expectCLIRefuses(
            serve + fleet + ["--trunk-listen", "127.0.0.1:0", "--fleet-secret", short.path], says: "exactly 32")
        try await expectCLIRefuses(
            serve + fleet + ["--trunk-listen", "127.0.0.1:0", "--fleet-secret", "/nonexistent/secret"],
            says: "cannot read")
        try await expectCLIRefuses(
            serve + fleet + ["--trunk-listen", "nowhere", "--fleet-secret", short.path], says: "HOST:PORT")
        // Trunks on the relay's own port publish --listen: a wildcard address is no address to dial.
        let wildcard = ["serve", "--listen", "0.0.0.0:0"] + serve.dropFirst(3)
        try await expectCLIRefuses(wildcard + fleet + ["--fleet-secret", short.path], says: "exactly 32")
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-secret-\(UUID().uuidString)")
        try Data(repeating: 2, count: 32).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        try await expectCLIRefuses(
            wildcard + fleet + ["--fleet-secret", secret.path], says: "--trunk-listen HOST:PORT")
        // A reset secret too short to derive from.
        try await expectCLIRefuses(serve + fleet + ["--reset-secret", short.path], says: "--reset-secret")
        // Garbage for a certificate: no name to verify the other relays for.
        try await expectCLIRefuses(
            ["serve", "--listen", "127.0.0.1:0", "--cert", short.path, "--key", Fixtures.serverKey, "--talk-groups"]
                + fleet + ["--fleet-secret", secret.path], says: "--cert")
    }
}
