import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// `serve --admin`: health, readiness and OpenMetrics over a real socket of the real CLI, every metric of the
/// production article present, hostile HTTP answered and the relay still up.
@Suite(.serialized, .integration) struct AdminEndpointTests {
    /// The relay with `--admin 127.0.0.1:0` and the admin address it printed.
    static func relayWithAdmin(_ more: [String] = []) async throws -> (ChildServer, String) {
        let relay = try await startChildRelay(events: false, ["--admin", "127.0.0.1:0"] + more)
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        return (relay, String(line.dropFirst("admin on ".count)))
    }

    /// The `ptt_relay_*` families the production article names.
    static func documentedMetrics() throws -> Set<String> {
        let article = try String(
            contentsOfFile: "\(Fixtures.root)/Sources/PTTTransport/PTTTransport.docc/RunningARelayInProduction.md",
            encoding: .utf8)
        let pattern = try NSRegularExpression(pattern: "ptt_relay_[a-z0-9_]+")
        let range = NSRange(article.startIndex..., in: article)
        return Set(
            pattern.matches(in: article, range: range).compactMap {
                Range($0.range, in: article).map { String(article[$0]) }
            })
    }

    @Test func healthReadinessAndEveryDocumentedMetricAfterRealHandshakes() async throws {
        let (relay, admin) = try await Self.relayWithAdmin()
        defer { relay.stopNow() }
        #expect(try adminGet(admin, "/healthz").status == 200)
        #expect(try adminGet(admin, "/readyz").status == 200)
        #expect(try adminGet(admin, "/nothing").status == 404)

        let address = try #require(ServerAddress(relay.address))
        for policy in [FallbackPolicy.quicOnly, .tcpOnly] {
            let connection = try await TCPFallbackTests.client(policy).connect(to: address)
            try connection.sendDatagram([1, 2, 3])
            _ = try await withTimeout {
                for await _ in connection.datagrams { break }
            }
            await connection.close(code: 0, reason: "done")
        }

        let (status, text) = try adminGet(admin, "/metrics")
        #expect(status == 200)
        #expect(text.hasSuffix("# EOF\n"))
        // Every line: a TYPE/HELP comment, or `name{labels} value` with a number.
        let sample = try NSRegularExpression(
            pattern: #"^([a-z_][a-z0-9_]*)(\{([a-z_][a-z0-9_]*="[^"\\]*(\\.[^"\\]*)*",?)*\})? (-?[0-9.e+]+|\+Inf|NaN)$"#
        )
        var values: [String: Double] = [:]
        var families: Set<String> = []
        for line in text.split(separator: "\n").map(String.init) where line != "# EOF" {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                families.insert(String(line.split(separator: " ")[2]))
                continue
            }
            let range = NSRange(line.startIndex..., in: line)
            let match = try #require(sample.firstMatch(in: line, range: range), "not an OpenMetrics line: \(line)")
            let name = String(line[Range(match.range(at: 1), in: line)!])
            let key = line.split(separator: " ").dropLast().joined(separator: " ")
            values[key] = Double(line.split(separator: " ").last!)
            #expect(families.contains { name.hasPrefix($0) }, "\(name) has no TYPE line before it")
        }
        #expect(values[#"ptt_relay_handshakes_total{transport="quic",kind="full"}"#] ?? 0 >= 1)
        #expect(values[#"ptt_relay_handshakes_total{transport="tcp",kind="full"}"#] ?? 0 >= 1)
        #expect(values[#"ptt_relay_datagrams_received_total{transport="quic"}"#] ?? 0 >= 1)
        #expect(values[#"ptt_relay_datagrams_sent_total{transport="tcp"}"#] ?? 0 >= 1)
        #expect(values["ptt_relay_ready"] == 1)
        let documented = try Self.documentedMetrics()
        #expect(documented.count >= 10, "the article names the metrics")
        // The talk groups' families are served with --talk-groups only (`TalkGroupMetricsTests`), the workers
        // alongside by the --workers supervisor only (`WorkerUpgradeMetricsTests`).
        for name in documented where !name.hasPrefix("ptt_relay_group_") && name != "ptt_relay_workers_alongside" {
            #expect(families.contains(name) || values.keys.contains { $0.hasPrefix(name) }, "\(name) not served")
        }
        for family in families {
            #expect(documented.contains { $0.hasPrefix(family) }, "\(family) is served but not documented")
        }
    }

    /// A live QUIC connection is counted by its version, and its datagrams before it ends (the scrape reads live
    /// connections' counters only: `QUICConnection.metricsSample`).
    @Test func aLiveConnectionIsCountedByVersionWithItsDatagrams() async throws {
        let (relay, admin) = try await Self.relayWithAdmin()
        defer { relay.stopNow() }
        let connection = try await TCPFallbackTests.client(.quicOnly).connect(
            to: try #require(ServerAddress(relay.address)))
        for _ in 0..<3 {
            try connection.sendDatagram([1, 2, 3])
            _ = try await withTimeout {
                for await _ in connection.datagrams { break }
            }
        }
        let text = try adminGet(admin, "/metrics").body
        let lines = Set(text.split(separator: "\n").map(String.init))
        #expect(lines.contains(#"ptt_relay_connections{transport="quic",version="1"} 1"#), "\(text)")
        #expect(lines.contains(#"ptt_relay_connections{transport="quic",version="handshake"} 0"#))
        let received = lines.first { $0.hasPrefix(#"ptt_relay_datagrams_received_total{transport="quic"} "#) }
        #expect(received.flatMap { Double($0.split(separator: " ").last!) } ?? 0 >= 3, "\(received ?? "none")")
        await connection.close(code: 0, reason: "done")
    }

    /// Garbage, oversized, slow and surplus connections: each answered with an error status (or closed), and the
    /// endpoint and the relay answer normally afterwards.
    @Test func hostileHTTPLeavesTheRelayUp() async throws {
        let (relay, admin) = try await Self.relayWithAdmin()
        defer { relay.stopNow() }
        var generator = SystemRandomNumberGenerator()
        let hostile: [[UInt8]] =
            [
                Array("GARBAGE\r\n\r\n".utf8), Array("POST /metrics HTTP/1.1\r\n\r\n".utf8),
                Array("GET /metrics HTTP/9.9\r\n\r\n".utf8), Array("GET metrics HTTP/1.1\r\n\r\n".utf8),
                Array("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n".utf8),
                Array(("GET /healthz HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 100) + "\r\n").utf8),
                Array(("GET /" + String(repeating: "a", count: 10_000) + " HTTP/1.1\r\n\r\n").utf8),
                [0, 0xFF, 0xFE, 13, 10, 13, 10], Array("GET /\u{E9} HTTP/1.1\r\n\r\n".utf8),
            ]
            + (0..<20).map { _ in
                (0..<Int.random(in: 1...600, using: &generator)).map { _ in UInt8.random(in: 0...255) } + [
                    13, 10, 13, 10,
                ]
            }
        for request in hostile {
            let reply = try adminExchange(admin, request)
            #expect(reply.isEmpty || reply.hasPrefix("HTTP/1.1 4"), "\(reply.prefix(40))")
        }
        // More idle connections than the endpoint keeps: the surplus is closed, the endpoint still answers once
        // they are gone, and an idle one is closed by the endpoint's timeout.
        // Our sockets give up reading after 30 s; the endpoint closes an idle connection after 5 s. Less than 20 s
        // proves the endpoint closed it, with room for a loaded machine (9 s left it 4 s).
        let idle = try (0..<24).map { _ in try adminConnect(admin, timeout: 30) }
        let clock = ContinuousClock()
        let started = clock.now
        _ = adminReadToEnd(idle[0])
        #expect(clock.now - started < .seconds(20), "an idle connection is closed by the endpoint's timeout")
        for fd in idle { close(fd) }
        var healthy = false
        for _ in 0..<50 where !healthy {
            healthy = (try? adminGet(admin, "/healthz").status) == 200
            if !healthy { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(healthy)
        #expect(relay.isRunning)
        #expect(try adminGet(admin, "/metrics").status == 200)
    }

    /// 503 while a configured store never answered (none listens on its port), and while draining.
    @Test func readinessFollowsTheStoreAndTheDrain() async throws {
        // Port 1: nothing listens there, every connect is refused.
        let (relay, admin) = try await Self.relayWithAdmin([
            "--anti-replay", "redis://127.0.0.1:1", "--drain-seconds", "20",
        ])
        defer { relay.stopNow() }
        let (status, body) = try adminGet(admin, "/readyz")
        #expect(status == 503 && body.contains("never answered"), "\(status) \(body)")
        #expect(try adminGet(admin, "/healthz").status == 200)
        let metrics = try adminGet(admin, "/metrics").body
        #expect(metrics.contains("ptt_relay_anti_replay_store_answered 0"))

        let address = try #require(ServerAddress(relay.address))
        let connection = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
        kill(relay.processIdentifier, SIGTERM)
        _ = try await withTimeout(.seconds(10)) { try await connection.relayDraining() }
        let draining = try adminGet(admin, "/readyz")
        #expect(draining.status == 503 && draining.body.contains("draining"), "\(draining)")
        #expect(try adminGet(admin, "/metrics").body.contains("ptt_relay_draining 1"))
        await connection.close(code: 0, reason: "moving on")
    }

    @Test func aNonLoopbackAdminAddressIsRefusedUnlessAllowed() async throws {
        try await expectCLIRefuses(
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--admin", "0.0.0.0:0",
            ], says: "--admin-allow-remote")
        try await expectCLIRefuses(
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--admin", "nonsense",
            ], says: "--admin nonsense")
    }
}
