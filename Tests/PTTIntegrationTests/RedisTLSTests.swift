import ChildProcesses
import Foundation
import TestSupport
import Testing
import TransportCore

/// `serve --anti-replay rediss://USER@HOST:PORT --redis-ca PEM` against a real redis-server with a TLS port
/// (`--tls-port`, Debian's build): 0-RTT through it with an ACL user and a password; a CA that did not sign Redis'
/// certificate, a plain port on a rediss:// URL and the TLS port on a redis:// URL each leave the relay up with 0-RTT
/// refused (fail closed) and a log line that says what to fix.
@Suite(.serialized, .integration) struct RedisTLSTests {
    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-rediss-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Polls `/readyz` until it answers `status` (true) or 15 s passed (false): the store's first answer takes a TLS
    /// handshake, which a loaded machine may make slow.
    static func readiness(_ admin: String, becomes status: Int) async throws -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .seconds(15))
        while ContinuousClock.now < deadline {
            if try adminGet(admin, "/readyz").status == status { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try adminGet(admin, "/readyz").status == status
    }

    /// The relay's stderr (JSON log lines) once it stopped.
    private static func log(of relay: ChildServer) -> String {
        relay.stopNow()
        return relay.errorOutput()
    }

    /// A relay started on `redis` over TLS with `options` (its CA and any client identity): the store never answers,
    /// `/readyz` says so, a wake completes in 1-RTT with 0-RTT refused, the relay stays up and nothing reaches
    /// Redis. Returns the relay's log (it is stopped) for the caller's check of what it says to do.
    static func failsClosed(_ redis: RedisTestServer, _ options: [String]) async throws -> String {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin(
            ["--anti-replay", redis.tlsURL()] + options + [
                "--ticket-key", directory.appendingPathComponent("ticket.key").path,
            ])
        #expect(try adminGet(admin, "/readyz").status == 503, "the store never answered")
        let warm = try await coldThenWarmConnect(relay, directory: directory)
        #expect(warm.status == 0, "a refused 0-RTT completes in 1-RTT: \(warm.stderr)")
        #expect(jsonObject(warm.stdout)?["early_data"] as? String != "accepted", "fail closed: \(warm.stdout)")
        #expect(relay.isRunning)
        relay.stopNow()
        #expect(try redis.claimCount() == 0, "nothing reached Redis")
        return relay.errorOutput()
    }

    @Test func zeroRTTThroughTLSWithAnACLUserAndAPassword() async throws {
        let redis = try await RedisTestServer.startTLS(
            options: ["--requirepass", "default-password"], auth: ["AUTH", "default-password"])
        defer { redis.stop() }
        let created = try redis.command(["ACL", "SETUSER", "relay", "on", ">relay-password", "~*", "&*", "+@all"])
        #expect(created == .simpleString("OK"))
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let password = directory.appendingPathComponent("redis.password").path
        try "relay-password\n".write(toFile: password, atomically: true, encoding: .utf8)
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", redis.tlsURL(user: "relay", host: "localhost"), "--redis-ca", Fixtures.ca,
            "--anti-replay-password-file", password,
            "--ticket-key", directory.appendingPathComponent("ticket.key").path,
        ])
        defer { relay.stopNow() }
        #expect(try await Self.readiness(admin, becomes: 200), "the store answered over TLS")
        // Tickets issued in the second the relay first saw Redis' memory are not trusted with 0-RTT: let it pass.
        try await Task.sleep(for: .milliseconds(1100))
        let warm = try await coldThenWarmConnect(relay, directory: directory)
        #expect(jsonObject(warm.stdout)?["early_data"] as? String == "accepted", "\(warm.stdout) \(warm.stderr)")
        // The claim went to this Redis (read back on its plain port): the marker and at least one ticket.
        #expect(try redis.claimCount() >= 2)
        // The same again with the address as the name (the certificate carries 127.0.0.1 too) is the other test's.
    }

    @Test func aCAThatDidNotSignRedisFailsClosedAndSaysSo() async throws {
        let redis = try await RedisTestServer.startTLS()
        defer { redis.stop() }
        let log = try await Self.failsClosed(redis, ["--redis-ca", Fixtures.otherCA])
        #expect(log.contains("certificate-untrusted") && log.contains("--redis-ca"), "\(log)")
    }

    @Test func aPlainPortOnARedissURLSaysSo() async throws {
        let redis = try await RedisTestServer.start()
        defer { redis.stop() }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", "rediss://127.0.0.1:\(redis.port)?deadline-ms=1000", "--redis-ca", Fixtures.ca,
        ])
        #expect(try adminGet(admin, "/readyz").status == 503)
        #expect(relay.isRunning)
        let log = Self.log(of: relay)
        #expect(log.contains("tls-port") && log.contains("never_answered"), "\(log)")
    }

    @Test func theTLSPortOnARedisURLSaysSo() async throws {
        let redis = try await RedisTestServer.startTLS()
        defer { redis.stop() }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", "redis://127.0.0.1:\(redis.tlsPort ?? 0)?deadline-ms=1000",
        ])
        #expect(try adminGet(admin, "/readyz").status == 503)
        #expect(relay.isRunning)
        let log = Self.log(of: relay)
        #expect(log.contains("tls-port, the URL is rediss:"), "\(log)")  // JSON escapes the slashes
    }

    @Test func aFleetHeartbeatsThroughTLS() async throws {
        let redis = try await RedisTestServer.startTLS()
        defer { redis.stop() }
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let relay = try await FleetCLITests.relay(
            "relay-a", store: redis.port, directory: directory,
            extra: ["--fleet", "rediss://localhost:\(redis.tlsPort ?? 0)", "--redis-ca", Fixtures.ca])
        defer { relay.stopNow() }
        let alone = "{\"event\":\"fleet\",\"relays\":[\"relay-a\"]}"
        #expect(await relay.line(startingWith: alone, within: .seconds(15)) != nil, "its heartbeat went through TLS")
    }

    @Test func redisCAWithoutTLSIsRefused() async throws {
        try await expectCLIRefuses(
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--anti-replay", "redis://127.0.0.1:6379", "--redis-ca", Fixtures.ca,
            ], says: "--redis-ca needs a rediss://")
    }
}
