import ChildProcesses
import Foundation
import TestSupport
import Testing
import TransportCore

/// `serve --anti-replay rediss://… --redis-cert PEM --redis-key PEM` against a real redis-server that asks every
/// client for a certificate (`--tls-auth-clients yes`, Debian's build, its `tls-ca-cert-file` the test CA): with the
/// relay's client certificate the store answers over mutual TLS and 0-RTT is accepted; without one Redis closes the
/// handshake, the relay stays up with 0-RTT refused and says to pass --redis-cert and --redis-key; options that do
/// not go together are refused at start.
@Suite(.serialized, .integration) struct RedisMutualTLSTests {
    @Test func zeroRTTThroughMutualTLSWithTheRelaysCertificate() async throws {
        let redis = try await RedisTestServer.startTLS(options: ["--tls-auth-clients", "yes"])
        defer { redis.stop() }
        let directory = try RedisTLSTests.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", redis.tlsURL(), "--redis-ca", Fixtures.ca,
            "--redis-cert", Fixtures.clientCert, "--redis-key", Fixtures.clientKey,
            "--ticket-key", directory.appendingPathComponent("ticket.key").path,
        ])
        defer { relay.stopNow() }
        #expect(try await RedisTLSTests.readiness(admin, becomes: 200), "the store answered over mutual TLS")
        // Tickets issued in the second the relay first saw Redis' memory are not trusted with 0-RTT: let it pass.
        try await Task.sleep(for: .milliseconds(1100))
        let warm = try await coldThenWarmConnect(relay, directory: directory)
        #expect(jsonObject(warm.stdout)?["early_data"] as? String == "accepted", "\(warm.stdout) \(warm.stderr)")
        #expect(try redis.claimCount() >= 2, "the claims reached this Redis")
    }

    @Test func withoutACertificateTheRelayFailsClosedAndSaysSo() async throws {
        let redis = try await RedisTestServer.startTLS(options: ["--tls-auth-clients", "yes"])
        defer { redis.stop() }
        let log = try await RedisTLSTests.failsClosed(redis, ["--redis-ca", Fixtures.ca])
        #expect(log.contains("--redis-cert"), "the log says what to pass: \(log)")
    }

    @Test func optionsThatDoNotGoTogetherAreRefused() async throws {
        let base = ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey]
        let tls = ["--anti-replay", "rediss://127.0.0.1:1"]
        try await expectCLIRefuses(
            base + tls + ["--redis-cert", Fixtures.clientCert], says: "--redis-cert and --redis-key go together")
        try await expectCLIRefuses(
            base + [
                "--anti-replay", "redis://127.0.0.1:1", "--redis-cert", Fixtures.clientCert, "--redis-key",
                Fixtures.clientKey,
            ], says: "--redis-cert needs a rediss://")
        // Garbage in the files: refused at start with the file named.
        let directory = try RedisTLSTests.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let garbage = directory.appendingPathComponent("garbage.pem").path
        try Data((0..<300).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: garbage))
        try await expectCLIRefuses(
            base + tls + ["--redis-cert", garbage, "--redis-key", Fixtures.clientKey], says: garbage)
        try await expectCLIRefuses(
            base + tls + ["--redis-cert", Fixtures.clientCert, "--redis-key", Fixtures.serverKey],
            says: "client certificate")
    }
}
