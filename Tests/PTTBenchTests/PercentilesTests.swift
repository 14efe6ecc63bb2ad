import PTTTransport
import Testing

@testable import PTTBench

/// Linear interpolation between closest ranks (Hyndman-Fan type 7): h = (n - 1) * p / 100.
@Suite("Benchmark statistics")
struct PercentilesTests {
    /// Within a few ulps: for a rank with a non-dyadic fraction (3.6, 1.2, ...) the blend is not exact in binary.
    static func close(_ value: Double?, _ expected: Double) -> Bool {
        guard let value else { return false }
        return abs(value - expected) <= 1e-12 * Swift.max(1, abs(expected))
    }

    @Test func unsortedInputGivesTheInterpolatedOrderStatistics() {
        let samples = Samples([4, 1, 3, 2, 5])  // unsorted on purpose; sorted 1 2 3 4 5, h = 4p/100
        #expect(samples.p50 == 3)  // h = 2: a sample itself
        #expect(samples.percentile(0) == 1)  // min
        #expect(samples.percentile(100) == 5)  // max
        #expect(samples.percentile(25) == 2)  // h = 1
        #expect(samples.percentile(75) == 4)  // h = 3
        #expect(samples.percentile(12.5) == 1.5)  // h = 0.5
        #expect(Self.close(samples.p90, 4.6))  // h = 3.6 → 4 + 0.6 * (5 - 4)
        #expect(Self.close(samples.p99, 4.96))  // h = 3.96
        #expect(samples.mean == 3)
        #expect(samples.min == 1 && samples.max == 5 && samples.count == 5)
        #expect(samples.values == [4, 1, 3, 2, 5], "insertion order is kept")
    }

    @Test func knownDataMatchesTheNumPyDefinition() {
        // numpy.percentile([15, 20, 35, 40, 50], [5, 30, 40, 50, 100]) == [16, 23, 29, 35, 50]
        let samples = Samples([50, 15, 40, 20, 35])
        #expect(Self.close(samples.percentile(5), 16))
        #expect(Self.close(samples.percentile(30), 23))
        #expect(Self.close(samples.percentile(40), 29))
        #expect(samples.p50 == 35)
        #expect(samples.percentile(100) == 50)
        #expect(samples.percentiles([0, 50, 100]) == [15, 35, 50])
    }

    @Test func evenCountInterpolatesBetweenTheMiddleTwo() {
        #expect(Samples([20, 10]).p50 == 15)
        #expect(Samples([1, 2, 3, 4]).p50 == 2.5)
    }

    @Test func exactRanksReturnASampleItself() {
        // 11 samples: h = p / 10, whole for p50 and p90; 101 samples: h = p, whole for p99.
        let eleven = Samples((0...10).map { Double($0) * 0.1 }.reversed())
        #expect(eleven.p50 == 0.5)
        #expect(eleven.p90 == Double(9) * 0.1)
        let hundredAndOne = Samples((0...100).map(Double.init))
        #expect(hundredAndOne.p99 == 99)
        #expect(hundredAndOne.p90 == 90)
    }

    @Test func emptyGivesNil() {
        let empty = Samples()
        #expect(empty.p50 == nil && empty.p90 == nil && empty.p99 == nil)
        #expect(empty.percentile(0) == nil && empty.percentiles([50]) == nil)
        #expect(empty.min == nil && empty.max == nil && empty.mean == nil)
        #expect(empty.count == 0 && empty.isEmpty)
    }

    @Test func singleSampleIsEveryPercentile() {
        let one = Samples([7])
        #expect(one.p50 == 7 && one.p90 == 7 && one.p99 == 7 && one.percentile(0) == 7)
        #expect(one.min == 7 && one.max == 7 && one.mean == 7 && one.count == 1)
    }

    @Test func outOfRangePIsClampedAndNaNGivesNil() {
        let samples = Samples([3, 1, 2])
        #expect(samples.percentile(-5) == 1)
        #expect(samples.percentile(250) == 3)
        #expect(samples.percentile(.nan) == nil)
        #expect(samples.percentiles([50, .nan]) == nil)
    }

    @Test func appendingKeepsTheStatisticsCurrent() {
        var samples = Samples()
        samples.append(10)
        samples.append(contentsOf: [30, 20])
        #expect(samples.count == 3 && samples.p50 == 20 && samples.mean == 20)
        #expect(samples.percentile(-0.0) == 10)
    }
}

// MARK: - Needs the whole PTTBench module (reports, scenarios); everything above needs only Samples.

@Suite("Benchmark report")
struct BenchReportTests {
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

    @Test func theHeaderNamesTheLinkedLibraries() {
        let report = BenchReport(machine: "test", rttMilliseconds: nil, results: [])
        #expect(report.libraries == "ngtcp2 \(LinkedLibraries.ngtcp2), GnuTLS \(LinkedLibraries.gnutls)")
        #expect(report.table().split(separator: "\n").first?.contains(report.libraries) == true, "\(report.table())")
        #expect(report.jsonObject()["libraries"] as? String == report.libraries)
    }
}
