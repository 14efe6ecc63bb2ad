import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Issue 36: the host's `/metrics` (`serve --workers 2 --admin`) during an in-place upgrade's overlap. The old
/// generation drains while its connections last (plain connections, which do not move: they hold it for up to
/// `--drain-seconds`); meanwhile its handshakes and connections stay in the host's figures, counted beside the new
/// generation's, and the host stays ready and not draining.
@Suite(.serialized, .integration) struct WorkerUpgradeMetricsTests {
    static func value(_ text: String, _ key: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(key + " ") }.flatMap {
            Double($0.split(separator: " ").last ?? "")
        }
    }

    @Test func theOldGenerationStaysInTheHostsMetricsWhileItDrains() async throws {
        let (directory, relay, address, first) = try await WorkerUpgradeTests.start(["--admin", "127.0.0.1:0"])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(20)))
        let admin = String(line.dropFirst("admin on ".count))
        #expect(
            await eventually(within: .seconds(30)) { WorkerAdminTests.status(admin, "/readyz") == 200 },
            "the first generation up")

        var calls: [TransportConnection] = []
        for _ in 0..<4 {
            let call = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
            try call.sendDatagram([1])
            _ = try await withTimeout { for await _ in call.datagrams { break } }
            calls.append(call)
        }
        let handshakes = #"ptt_relay_handshakes_total{transport="quic",kind="full"}"#
        let before = try adminGet(admin, "/metrics").body
        #expect(Self.value(before, handshakes) ?? 0 >= 4, "\(before)")
        #expect(Self.value(before, "ptt_relay_workers_alongside") == 0, "\(before)")

        kill(relay.processIdentifier, SIGUSR2)
        // The upgrade committed: the new generation serves, the old one got its SIGTERM and drains (the calls hold
        // it up to --drain-seconds).
        #expect(await relay.errorLine(containing: #""event":"upgraded""#, within: .seconds(40)) != nil)
        let overlap = Locked("")
        let seen = await eventually(within: .seconds(20)) {
            guard let (status, text) = try? adminGet(admin, "/metrics"), status == 200 else { return false }
            overlap.withLock { $0 = text }
            // Both old workers, or one: the four calls may all have landed on one worker, and the other, with
            // nothing to drain, ends at once.
            return Self.value(text, "ptt_relay_workers_alongside") ?? 0 >= 1 && Self.value(text, handshakes) ?? 0 >= 4
                && Self.value(text, #"ptt_relay_connections{transport="quic",version="1"}"#) ?? 0 >= 4
                && Self.value(text, "ptt_relay_ready") == 1 && Self.value(text, "ptt_relay_draining") == 0
        }
        // The old generation's workers counted alongside, their handshakes and calls still in the host's figures,
        // the host ready and not draining (it serves through its new generation).
        #expect(seen, "\(overlap.withLock { $0 })")
        #expect(WorkerAdminTests.status(admin, "/readyz") == 200)
        #expect(first.keys.contains { kill($0, 0) == 0 }, "scraped while the old generation still ran")

        for call in calls { await call.close(code: 0, reason: "done") }
        #expect(
            await eventually(within: .seconds(30)) {
                (try? adminGet(admin, "/metrics")).map { Self.value($0.body, "ptt_relay_workers_alongside") == 0 }
                    ?? false
            }, "the old generation left once its calls closed")
    }
}
