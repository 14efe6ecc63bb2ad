import ChildProcesses
import Foundation
import TestSupport
import Testing

/// Issue 36: `serve --talk-groups --admin` serves the talk groups' metrics — floor events by kind, the wake hook's
/// calls and failures, fan-out copies and catch-up frames — each counted by a real burst of the real CLI, and every
/// family documented in the production article.
@Suite(.serialized, .integration) struct TalkGroupMetricsTests {
    /// The samples of `/metrics` at `admin`, by their name and labels.
    static func samples(_ admin: String) throws -> [String: Double] {
        var values: [String: Double] = [:]
        for line in try adminGet(admin, "/metrics").body.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { values[String(parts[0])] = Double(parts[1]) }
        }
        return values
    }

    @Test func aBurstCountsFloorWakeFanOutAndCatchUp() async throws {
        let scene = try TalkGroupCLIScene("tgm")
        defer { scene.remove() }
        // The hook records its input, then fails: a call counted, and a failure.
        let relay = try await scene.startRelay(hookThen: "; exit 3", ["--admin", "127.0.0.1:0"])
        defer { relay.stopNow() }
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        let admin = String(line.dropFirst("admin on ".count))
        // Served from the start (the families appear once the talk-group relay runs, right after "admin on").
        #expect(
            await eventually {
                (try? Self.samples(admin))?[#"ptt_relay_group_floor_events_total{event="granted"}"#] == 0
            })

        let common = scene.phone(relay)
        let bob = scene.bob
        let first = try await runProgram(Subprocess.cli, common + bob + ["--listen", "0.3"])  // joins, suspends
        #expect(first.status == 0, "\(first.stderr)")
        // Carol listens live through the burst; dave asks for the floor while alice holds it.
        // Alice talks 5 s, room for dave's process to start and ask on a loaded machine.
        let carol = Task { try await runProgram(Subprocess.cli, common + ["--user", "carol", "--listen", "10"]) }
        let alice = Task { try await runProgram(Subprocess.cli, common + ["--user", "alice", "--talk", "250"]) }
        let granted = #"ptt_relay_group_floor_events_total{event="granted"}"#
        #expect(await eventually { ((try? Self.samples(admin))?[granted] ?? 0) >= 1 })
        let dave = try await runProgram(Subprocess.cli, common + ["--user", "dave", "--talk", "1"])
        let said = try await alice.value
        #expect(said.status == 0, "\(said.stderr)")
        let hook = try await scene.firstWake()
        let ticket = try #require(hook["ticket"] as? String)
        let woken = try await runProgram(Subprocess.cli, common + bob + ["--ticket", ticket, "--listen", "3"])
        #expect(woken.status == 0, "\(woken.stderr)")
        _ = try await carol.value

        let after = try Self.samples(admin)
        func value(_ key: String) -> Double { after[key] ?? -1 }
        #expect(value(granted) >= 1, "\(after)")
        #expect(value(#"ptt_relay_group_floor_events_total{event="released",reason="released"}"#) >= 1)
        let waited =
            value(#"ptt_relay_group_floor_events_total{event="queued"}"#)
            + value(#"ptt_relay_group_floor_events_total{event="denied",cause="1"}"#)
        #expect(waited >= 1, "dave waited or was denied: \(dave.stdout) \(after)")
        #expect(value("ptt_relay_group_wake_hook_calls_total") >= 1)
        #expect(value("ptt_relay_group_wake_hook_members_total") >= 1)
        #expect(value(#"ptt_relay_group_wake_hook_failures_total{reason="failed"}"#) >= 1, "the hook exits 3")
        #expect(value(#"ptt_relay_group_wake_hook_failures_total{reason="timeout"}"#) == 0)
        #expect(value("ptt_relay_group_fanout_copies_total") >= 1, "carol heard alice live")
        #expect(value("ptt_relay_group_catch_up_frames_total") >= 1, "bob caught up from the buffer")

        // Every group family served is documented, and every documented one served.
        let documented = try AdminEndpointTests.documentedMetrics().filter { $0.hasPrefix("ptt_relay_group_") }
        #expect(documented.count >= 5)
        for name in documented {
            #expect(after.keys.contains { $0.hasPrefix(name) }, "\(name) documented, not served")
        }
        for key in after.keys where key.hasPrefix("ptt_relay_group_") {
            #expect(documented.contains { key.hasPrefix($0) }, "\(key) served, not documented")
        }
    }
}
