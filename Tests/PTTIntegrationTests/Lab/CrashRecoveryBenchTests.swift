import Foundation
import TestSupport
import Testing

@testable import PTTBench

/// `crash-recovery` with one round: a child relay killed with SIGKILL and restarted on the same port. With its
/// peer snapshot every listening link is measured back on a new connection; without it (the control) none is
/// within the bound. Behaviour only: the figures' size is the benchmark's to report.
@Suite("crash-recovery benchmark", .serialized, .integration)
struct CrashRecoveryBenchTests {
    /// The `ptt-transport` that `swift build` / `swift test` built next to the test bundle.
    static let executable: String? = {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ptt-transport").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    static func figures(_ row: ScenarioResult) -> [String: Double] {
        Dictionary(uniqueKeysWithValues: row.figures.map { ($0.name, $0.value) })
    }

    @Test func everyLinkRecoversWithTheSnapshotAndNoneWithout() async throws {
        var options = BenchOptions.inRepository()
        guard let executable = Self.executable else {
            Issue.record("no ptt-transport executable next to the tests to run the relay as a child")
            return
        }
        options.relayExecutable = executable
        options.iterations = 1
        options.scenarios = ["crash-recovery"]
        let report = try await Bench.run(options)
        #expect(report.results.map(\.scenario) == ["crash-recovery", "crash-recovery-no-snapshot"])

        let recovery = Self.figures(try #require(report.results.first { $0.scenario == "crash-recovery" }))
        let links = try #require(recovery["links"])
        #expect(recovery["rounds"] == 1)
        #expect(links == Double(CrashRecoveryScenario.linksPerRound), "\(recovery)")
        #expect(recovery["links_recovered_within_10s"] == links, "every link measured back: \(recovery)")
        #expect(recovery["resumed_links"] == links, "the restarted relay kept its ticket key: \(recovery)")
        let median = try #require(recovery["listening_to_ready_p50_ms"], "\(recovery)")
        let worst = try #require(recovery["listening_to_ready_max_ms"], "\(recovery)")
        #expect(median <= worst && worst < 10_000, "\(recovery)")
        #expect((recovery["relay_restart_p50_ms"] ?? 0) > 0, "the restart is timed on its own: \(recovery)")
        #expect((recovery["client_cpu_per_recovered_link_ms"] ?? 0) > 0, "\(recovery)")

        let controlRow = try #require(report.results.first { $0.scenario == "crash-recovery-no-snapshot" })
        let control = Self.figures(controlRow)
        #expect(control["links"] == links)
        #expect(control["links_recovered_within_2s"] == 0, "\(control)")
        #expect(control["listening_to_ready_p50_ms"] == nil)
        #expect(controlRow.note?.contains("not within 2 s") == true, "\(controlRow.note ?? "no note")")
    }

    @Test func itRunsOnlyWhenNamed() {
        var options = BenchOptions()
        #expect(!options.wants("crash-recovery"), "bench alone does not run it")
        #expect(options.wants("quic-full"))
        options.scenarios = ["crash-recovery"]
        #expect(options.wants("crash-recovery") && !options.wants("quic-full"))
    }
}
