import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import TestSupport
import Testing

/// SIGHUP reloads the trunks' fleet secret (derived from `--ticket-key`, with `--previous-ticket-key` during a
/// rotation) with the rest of a relay's files: its trunks carry on, a relay on the old file still trunks to it, and
/// a relay on the new file only trunks to it after (and is refused by the relay still on the old file alone).
@Suite("The trunk secret reloaded on SIGHUP", .serialized, .integration)
struct TrunkSecretReloadCLITests {
    static func key(_ bytes: Data, at url: URL) throws { try bytes.write(to: url, options: .atomic) }

    static func random64() -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<64).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Reads `relay`'s JSON lines until a trunk line about `peer` in `state` (within `limit`); the trunk lines
    /// read on the way are appended to `seen`.
    static func trunk(
        _ relay: ChildServer, peer: String, state: String, within limit: Duration, seen: inout [String]
    ) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            guard let line = await relay.line(startingWith: "{", within: deadline - ContinuousClock.now) else {
                return false
            }
            guard line.contains("\"event\":\"trunk\"") else { continue }
            seen.append(line)
            if line.contains("\"peer\":\"\(peer)\"") && line.contains("\"state\":\"\(state)\"") { return true }
        }
        return false
    }

    @Test func aRotatedTicketKeyReloadedOnSIGHUPKeepsOldTrunksAndAdmitsTheNewKey() async throws {
        let redis = try await RedisTestServer.start()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-hup-trunk-\(UUID().uuidString)")
        let (dirA, dirB, dirC) = (
            root.appendingPathComponent("a"), root.appendingPathComponent("b"), root.appendingPathComponent("c")
        )
        for directory in [dirA, dirB, dirC] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        defer { try? FileManager.default.removeItem(at: root) }
        let (old, new) = (Self.random64(), Self.random64())
        try Self.key(old, at: dirA.appendingPathComponent("ticket.key"))
        try Self.key(old, at: dirA.appendingPathComponent("ticket.key.previous"))  // no rotation yet
        try Self.key(old, at: dirB.appendingPathComponent("ticket.key"))
        try Self.key(new, at: dirC.appendingPathComponent("ticket.key"))

        let a = try await FleetCLITests.relay(
            "relay-a", store: redis.port, directory: dirA,
            extra: ["--previous-ticket-key", dirA.appendingPathComponent("ticket.key.previous").path])
        defer { a.stopNow() }
        let b = try await FleetCLITests.relay("relay-b", store: redis.port, directory: dirB)
        defer { b.stopNow() }
        var seenA: [String] = []
        #expect(
            await Self.trunk(a, peer: "relay-b", state: "up", within: .seconds(30), seen: &seenA),
            "relay-a and relay-b trunk on the old key: \(seenA)")

        // relay-a rotates: the old key becomes the previous one, a new key is written, SIGHUP.
        try Self.key(old, at: dirA.appendingPathComponent("ticket.key.previous"))
        try Self.key(new, at: dirA.appendingPathComponent("ticket.key"))
        kill(a.processIdentifier, SIGHUP)

        // relay-c holds only the new key: relay-a (current new, previous old) trunks to it once it reloaded (a
        // refused attempt before is dialed again a second later); relay-b (old only) refuses it.
        let c = try await FleetCLITests.relay("relay-c", store: redis.port, directory: dirC)
        defer { c.stopNow() }
        #expect(
            await Self.trunk(a, peer: "relay-c", state: "up", within: .seconds(30), seen: &seenA),
            "relay-a trunks to relay-c on the new key after SIGHUP: \(seenA)")
        // relay-b dials relay-c (its name sorts first), proving the old key only: relay-c refuses it.
        var seenB: [String] = []
        #expect(
            await Self.trunk(b, peer: "relay-c", state: "dial-failed", within: .seconds(30), seen: &seenB),
            "relay-b, on the old key only, is refused by relay-c: \(seenB)")
        // The trunk between relay-a and relay-b (old key) carried on through the reload: never down.
        #expect(
            !seenA.contains { $0.contains("\"peer\":\"relay-b\"") && $0.contains("\"state\":\"down\"") }, "\(seenA)")
        #expect(
            !seenB.contains { $0.contains("\"peer\":\"relay-a\"") && $0.contains("\"state\":\"down\"") }, "\(seenB)")
        #expect(a.isRunning && b.isRunning)
        let log = await onThread { () -> String in
            kill(a.processIdentifier, SIGINT)
            return a.errorOutput()
        }
        #expect(log.contains(#""trunk_secret":"current and previous""#), "\(log.suffix(2000))")
    }
}
