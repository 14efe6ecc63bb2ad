import ChildProcesses
import Foundation
import TestSupport
import Testing
import TransportCore

/// `serve --anti-replay redis://USER@HOST:PORT --anti-replay-password-file FILE` against a real redis-server that
/// requires a password (`requirepass`) and has an ACL user: the store answers and 0-RTT is accepted; a wrong
/// password leaves the relay up with the store unanswered; a password in the URL is refused.
@Suite(.serialized, .integration) struct RedisAuthTests {
    private static func passwordFile(_ directory: URL, _ password: String) throws -> String {
        let path = directory.appendingPathComponent("redis.password").path
        try (password + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(arguments: [("relay", "relay-password"), (nil, "default-password")] as [(String?, String)])
    func aRelayAuthenticatesAndAcceptsZeroRTT(user: String?, password: String) async throws {
        let redis = try await RedisTestServer.start(
            options: ["--requirepass", "default-password"], auth: ["AUTH", "default-password"])
        defer { redis.stop() }
        let created = try redis.command(["ACL", "SETUSER", "relay", "on", ">relay-password", "~*", "&*", "+@all"])
        #expect(created == .simpleString("OK"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-auth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = "redis://\(user.map { "\($0)@" } ?? "")127.0.0.1:\(redis.port)?deadline-ms=1000&clock-skew-ms=0"
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", url, "--anti-replay-password-file", try Self.passwordFile(directory, password),
            "--ticket-key", directory.appendingPathComponent("ticket.key").path,
        ])
        defer { relay.stopNow() }
        #expect(try adminGet(admin, "/readyz").status == 200, "the store answered")
        // Tickets issued in the second the relay first saw Redis' memory are not trusted with 0-RTT: let it pass.
        try await Task.sleep(for: .milliseconds(1100))
        let warm = try await coldThenWarmConnect(relay, directory: directory)
        #expect(jsonObject(warm.stdout)?["early_data"] as? String == "accepted", "\(warm.stdout) \(warm.stderr)")
    }

    @Test func aWrongPasswordLeavesTheStoreUnansweredAndTheRelayUp() async throws {
        let redis = try await RedisTestServer.start(
            options: ["--requirepass", "default-password"], auth: ["AUTH", "default-password"])
        defer { redis.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-auth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", "redis://127.0.0.1:\(redis.port)",
            "--anti-replay-password-file", try Self.passwordFile(directory, "wrong"),
        ])
        defer { relay.stopNow() }
        #expect(try adminGet(admin, "/readyz").status == 503)
        #expect(relay.isRunning)
    }

    @Test func aPasswordInTheURLIsRefused() async throws {
        try await expectCLIRefuses(
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--anti-replay", "redis://relay:secret@127.0.0.1:6379",
            ], says: "does not belong in the URL")
    }
}
