import ChildProcesses
import Foundation
import TestSupport
import Testing

/// A relay whose Redis host does not resolve (or whose store does not answer) at start: it starts, is not ready,
/// and refuses 0-RTT, counted, while phones still resume in 1-RTT.
@Suite(.serialized, .integration) struct RedisStartupTests {
    @Test(arguments: ["redis://no-such-host.invalid:6379", "redis://127.0.0.1:1"])
    func theRelayStartsAndRefusesZeroRTTCounted(store: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--anti-replay", store, "--ticket-key", directory.appendingPathComponent("ticket.key").path,
        ])
        defer { relay.stopNow() }
        #expect(try adminGet(admin, "/readyz").status == 503)
        let warm = try await coldThenWarmConnect(relay, directory: directory)
        #expect(warm.status == 0, "\(warm.stderr)")
        let result = try #require(jsonObject(warm.stdout))
        #expect(result["resumed"] as? Bool == true)
        #expect(result["early_data"] as? String != "accepted", "\(result)")
        let metrics = try adminGet(admin, "/metrics").body
        let refused = metrics.split(separator: "\n").filter { $0.hasPrefix("ptt_relay_zero_rtt_refused_total") }
            .compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
        #expect(refused >= 1, "the refusal is counted: \(metrics)")
        #expect(metrics.contains("ptt_relay_zero_rtt_accepted_total 0"))
    }
}
