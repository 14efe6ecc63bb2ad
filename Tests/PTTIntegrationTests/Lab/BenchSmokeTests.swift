import PTTTransport
import TestSupport
import Testing

@testable import PTTBench

@Suite("Benchmark smoke test on loopback", .integration)
struct BenchSmokeTests {
    @Test func everySetupScenarioThatCanRunProducesNumbers() async throws {
        var options = BenchOptions.inRepository()
        options.iterations = 3
        let setup = [
            "quic-full", "quic-resumed", "quic-0rtt", "quic-0rtt-rejected", "tcp-full", "tcp-resumed",
            "race-udp-blocked", "race-udp-known-blocked",
        ]
        options.scenarios = BenchScenario.all
        let report = try await Bench.run(options)
        for result in report.results where setup.contains(result.scenario) {
            #expect(result.firstResponse.count == 3, "\(result.scenario)")
            #expect((result.handshake.p50 ?? 0) > 0, "\(result.scenario)")
        }
        let fanout = report.results.first { $0.scenario == "capacity-fanout" }
        let fanoutFigures = Dictionary(uniqueKeysWithValues: (fanout?.figures ?? []).map { ($0.name, $0.value) })
        #expect(fanoutFigures["max_listeners_sustained"] != nil, "\(fanout?.note ?? "no capacity-fanout result")")
        #expect(
            fanoutFigures["last_pass_listeners"] != nil || fanoutFigures["first_fail_listeners"] != nil,
            "a measured step, passing or failing, is reported")
        if let loss = fanoutFigures["first_fail_loss_percent"] ?? fanoutFigures["last_pass_loss_percent"] {
            #expect((0...100).contains(loss))
        }
        // A scenario reports one row under its own name, or several named `<scenario>-<variant>`.
        let rows = report.results.filter { $0.peer == "ptt" }.map(\.scenario)
        let covered = BenchScenario.all.filter { name in
            rows.contains { $0 == name || (!BenchScenario.all.contains($0) && $0.hasPrefix(name + "-")) }
        }
        #expect(covered == BenchScenario.all, "every scenario ran; rows: \(rows)")
        #expect(rows.allSatisfy { row in BenchScenario.all.contains { row == $0 || row.hasPrefix($0 + "-") } })
        for name in ["capacity-datagrams", "capacity-memory"] {
            let result = report.results.first { $0.scenario == name && $0.peer == "ptt" }
            #expect(result?.figures.contains { $0.value > 0 } == true, "\(name): \(result?.note ?? "no result")")
        }
        let handshakes = report.results.first { $0.scenario == "capacity-handshakes" }
        #expect(handshakes?.figures.contains { $0.name == "full_handshakes_per_s" && $0.value > 0 } == true)
        // quic-full also runs against aioquic where it is installed, else one row says why not; never a failure.
        let aioquic = report.results.filter { $0.peer == "aioquic" }
        #expect(!aioquic.isEmpty)
        for row in aioquic where row.scenario == "quic-full" && row.note == nil {
            #expect(row.firstResponse.count == 3)
        }
        #expect(report.json().contains("\"scenarios\""))
    }
}
