import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// Issue 36: `serve --workers N --admin HOST:PORT` serves one endpoint for the host — the supervisor's, merging its
/// workers' — so a balancer polls one `/readyz` per relay: ready once every worker is, 503 while a killed worker is
/// being replaced and from the supervisor's SIGTERM on; `/metrics` counts every worker's handshakes.
@Suite(.serialized, .integration) struct WorkerAdminTests {
    static func status(_ admin: String, _ path: String) -> Int { (try? adminGet(admin, path).status) ?? -1 }

    @Test func oneEndpointForTheHostFollowsEveryWorker() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-wa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let relay = try await WorkerProcessTests.relay(
            redis: nil, directory: directory, ["--admin", "127.0.0.1:0", "--drain-seconds", "20"])
        defer { relay.stopNow() }
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        let admin = String(line.dropFirst("admin on ".count))
        #expect(Self.status(admin, "/healthz") == 200)
        #expect(await eventually(within: .seconds(20)) { Self.status(admin, "/readyz") == 200 }, "both workers up")

        // Handshakes on both workers (the kernel spreads new connections over the sockets): all counted.
        let address = try #require(ServerAddress(relay.address))
        var calls: [TransportConnection] = []
        for _ in 0..<6 {
            let call = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
            try call.sendDatagram([1])
            _ = try await withTimeout { for await _ in call.datagrams { break } }
            calls.append(call)
        }
        let (status, text) = try adminGet(admin, "/metrics")
        #expect(status == 200 && text.hasSuffix("# EOF\n"))
        let lines = text.split(separator: "\n")
        func value(_ key: String) -> Double? {
            lines.first { $0.hasPrefix(key + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(value(#"ptt_relay_handshakes_total{transport="quic",kind="full"}"#) ?? 0 >= 6, "\(text)")
        #expect(value(#"ptt_relay_connections{transport="quic",version="1"}"#) ?? 0 >= 6)
        #expect(value("ptt_relay_ready") == 1)
        #expect(lines.filter { $0.hasPrefix("ptt_relay_build_info") }.count == 1, "one build line, not one a worker")

        // A killed worker: not ready until its successor is, then ready again.
        let workers = try await WorkerProcessTests.waitForWorkers(of: relay.processIdentifier, count: 2)
        let victim = try #require(workers.keys.first)
        kill(victim, SIGKILL)
        #expect(await eventually { Self.status(admin, "/readyz") == 503 }, "a worker down")
        #expect(await eventually(within: .seconds(20)) { Self.status(admin, "/readyz") == 200 }, "replaced")

        // SIGTERM: 503 at once, while the workers drain (the calls hold them up to --drain-seconds).
        kill(relay.processIdentifier, SIGTERM)
        #expect(await eventually { Self.status(admin, "/readyz") == 503 })
        for call in calls { await call.close(code: 0, reason: "done") }
    }
}
