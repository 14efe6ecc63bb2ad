import ChildProcesses
import Testing

@testable import PTTBench

@Suite("ptt / aioquic comparison (pure)")
struct PeerComparisonTests {
    static func setup(_ scenario: String, peer: String, p50: Double) -> ScenarioResult {
        var result = ScenarioResult(scenario: scenario, iterations: 1)
        result.peer = peer
        result.handshake = Samples([p50])
        result.firstResponse = Samples([p50])
        return result
    }

    @Test func ratioIsOursOverTheirsAndNeedsBoth() {
        #expect(PeerComparison.ratio(1, 4) == 0.25)
        #expect(PeerComparison.ratio(nil, 4) == nil)
        #expect(PeerComparison.ratio(1, nil) == nil)
        #expect(PeerComparison.ratio(1, 0) == nil, "no division by zero")
        #expect(PeerComparison.ratio(.infinity, 2) == nil)
    }

    @Test func firstResponseRatioSitsOnThePeerRowOnly() {
        let ours = Self.setup("quic-full", peer: "ptt", p50: 1.5)
        let theirs = Self.setup("quic-full", peer: "aioquic", p50: 3)
        let other = Self.setup("quic-0rtt", peer: "aioquic", p50: 2)
        let results = [ours, theirs, other]
        #expect(PeerComparison.firstResponseRatio(of: theirs, in: results) == 0.5)
        #expect(PeerComparison.firstResponseRatio(of: ours, in: results) == nil)
        #expect(PeerComparison.firstResponseRatio(of: other, in: results) == nil, "no ptt row for quic-0rtt")
    }

    @Test func figureRatiosCompareRatesButNotTheOfferedLoad() {
        var ours = ScenarioResult(scenario: "capacity-datagrams", iterations: 1)
        ours.figure("datagrams_offered_per_s", 100)
        ours.figure("datagrams_received_per_s", 90)
        ours.figure("datagrams_dropped_before_send", 5)
        var theirs = ScenarioResult(scenario: "capacity-datagrams", iterations: 1)
        theirs.peer = "aioquic"
        theirs.figure("datagrams_offered_per_s", 100)
        theirs.figure("datagrams_received_per_s", 30)
        theirs.figure("datagrams_dropped_before_send", 50)
        let results = [ours, theirs]
        #expect(PeerComparison.figureRatio("datagrams_received_per_s", of: theirs, in: results) == 3)
        #expect(PeerComparison.figureRatio("datagrams_offered_per_s", of: theirs, in: results) == nil)
        #expect(PeerComparison.figureRatio("datagrams_dropped_before_send", of: theirs, in: results) == nil)
        let json = BenchReport(machine: "test", rttMilliseconds: nil, results: results).jsonObject()
        let rows = json["scenarios"] as? [[String: Any]]
        #expect(rows?.last?["ptt_over_peer_datagrams_received_per_s"] as? Double == 3)
        #expect(rows?.last?["peer"] as? String == "aioquic")
    }

    @Test func aioquicCountLineAndVmRSSAreParsed() {
        #expect(AioquicScenarios.receivedCount(in: "listening on x\ndatagrams_received 1234\n") == 1234)
        #expect(AioquicScenarios.receivedCount(in: "nothing\n") == nil)
        #expect(ResidentMemory.kib(fromStatus: "Name:\tx\nVmRSS:\t   51234 kB\nVmData: 1 kB\n") == 51234)
        #expect(ResidentMemory.kib(fromStatus: "Name:\tx\n") == nil)
    }
}
