import Testing
@testable import PTTBench

@Suite("Benchmark statistics")
struct PercentilesTests {
    @Test func linearInterpolationBetweenClosestRanks() {
        let samples = Samples([4, 1, 3, 2, 5])  // unsorted on purpose
        #expect(samples.p50 == 3)
        #expect(samples.percentile(0) == 1)
        #expect(samples.percentile(100) == 5)
        #expect(samples.percentile(25) == 2)
        #expect(samples.percentile(90) == 4.6)
        #expect(samples.mean == 3)
    }

    @Test func emptyAndSingleSample() {
        #expect(Samples().p50 == nil)
        #expect(Samples([7]).p99 == 7)
    }

    @Test func reportCarriesTheJSONContract() {
        var result = ScenarioResult(scenario: "quic-0rtt", iterations: 2)
        result.handshake = Samples([50, 52])
        result.firstResponse = Samples([51, 53])
        let object = BenchReport(machine: "test", rttMilliseconds: 50, results: [result]).jsonObject()
        let scenario = (object["scenarios"] as? [[String: Any]])?.first
        #expect(scenario?["first_response_p50_ms"] as? Double == 52)
        #expect(scenario?["first_response_p50_rtt"] as? Double == 1.04)
        #expect(object["rtt_ms"] as? Double == 50)
    }
}

@Suite("Benchmark smoke test on loopback")
struct BenchSmokeTests {
    @Test func everySetupScenarioThatCanRunProducesNumbers() async throws {
        var options = BenchOptions()
        options.iterations = 3
        let root = #filePath.components(separatedBy: "/Tests/")[0]
        options.certificate = "\(root)/certs/server.pem"
        options.privateKey = "\(root)/certs/server.key"
        options.certificateAuthority = "\(root)/certs/ca.pem"
        options.scenarios = ["quic-full", "quic-resumed", "quic-0rtt", "quic-0rtt-rejected", "tcp-full",
                             "capacity-handshakes"]
        let report = try await Bench.run(options)
        for result in report.results where result.scenario.hasPrefix("quic-") {
            #expect(result.firstResponse.count == 3, "\(result.scenario)")
            #expect((result.handshake.p50 ?? 0) > 0, "\(result.scenario)")
        }
        let tcp = report.results.first { $0.scenario == "tcp-full" }
        #expect(tcp?.note != nil, "a scenario that cannot run says why instead of inventing numbers")
        let handshakes = report.results.first { $0.scenario == "capacity-handshakes" }
        #expect(handshakes?.figures.contains { $0.name == "full_handshakes_per_s" && $0.value > 0 } == true)
        #expect(report.json().contains("\"scenarios\""))
    }
}
