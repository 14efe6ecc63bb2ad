import PTTTransport
import TestSupport
import Testing

@testable import PTTBench

/// `floor-access` with two rounds on loopback: one row per transport, each with KPI 1 (request → grant over the
/// awake and the waking talker), the wake's own figures and the emergency pre-emption figures, in snake_case. The
/// shape only: the figures' size is the benchmark's to report.
@Suite("floor-access benchmark", .serialized, .integration)
struct FloorAccessBenchTests {
    @Test func eachTransportReportsKPI1AndThePreemption() async throws {
        var options = BenchOptions.inRepository()
        options.iterations = 2
        options.scenarios = ["floor-access"]
        let report = try await Bench.run(options)
        #expect(report.results.map(\.scenario) == ["floor-access-quic", "floor-access-tcp"])
        for row in report.results {
            #expect(row.note?.hasPrefix("could not run") != true, "\(row.scenario): \(row.note ?? "")")
            let figures = Dictionary(uniqueKeysWithValues: row.figures.map { ($0.name, $0.value) })
            for name in [
                "request_to_grant_p50_ms", "request_to_grant_p95_ms", "request_to_grant_max_ms",
                "awake_request_to_grant_p95_ms", "wake_to_grant_p95_ms", "wakes_in_0rtt",
                "emergency_request_to_grant_p50_ms", "emergency_request_to_grant_max_ms",
                "old_holder_frames_after_grant_max", "requests_not_granted", "process_cpu_s", "wall_s",
            ] {
                #expect(figures[name] != nil, "\(row.scenario) lacks \(name): \(figures.keys.sorted())")
            }
            #expect(figures["requests_not_granted"] == 0, "\(row.scenario): \(figures)")
            #expect(
                row.figures.allSatisfy { $0.name.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" } },
                "snake_case: \(row.figures.map(\.name))")
            let p50 = try #require(figures["request_to_grant_p50_ms"])
            let p95 = try #require(figures["request_to_grant_p95_ms"])
            #expect(p50 > 0 && p50 <= p95, "\(figures)")
        }
        #expect(!BenchOptions().wants("floor-access"), "bench alone does not run it")
    }
}
