/// Ours against another implementation: the ratio columns of the report (ptt / aioquic). A ratio below 1 means
/// our figure is smaller: faster for latencies, slower for rates.
enum PeerComparison {
    /// `ours / theirs`, or nil when either is missing, not finite, or `theirs` is not positive.
    static func ratio(_ ours: Double?, _ theirs: Double?) -> Double? {
        guard let ours, let theirs, ours.isFinite, theirs.isFinite, theirs > 0 else { return nil }
        return ours / theirs
    }

    /// Our row for the same scenario as `result` (a row of another peer), if the report has one.
    static func ours(for result: ScenarioResult, in results: [ScenarioResult]) -> ScenarioResult? {
        guard result.peer != "ptt" else { return nil }
        return results.first { $0.scenario == result.scenario && $0.peer == "ptt" }
    }

    /// Figures compared between peers: the rates, except the load our client offered (the same generator on
    /// both sides, not a property of the peer).
    static func isCompared(_ figure: String) -> Bool { figure.hasSuffix("_per_s") && !figure.contains("offered") }

    /// ptt / peer for first-response p50 (setup rows).
    static func firstResponseRatio(of result: ScenarioResult, in results: [ScenarioResult]) -> Double? {
        ratio(ours(for: result, in: results)?.firstResponse.p50, result.firstResponse.p50)
    }

    /// ptt / peer for one named figure (capacity rows); nil for figures that are not rates.
    static func figureRatio(_ name: String, of result: ScenarioResult, in results: [ScenarioResult]) -> Double? {
        guard isCompared(name), let ours = ours(for: result, in: results) else { return nil }
        let theirs = result.figures.first { $0.name == name }?.value
        return ratio(ours.figures.first { $0.name == name }?.value, theirs)
    }
}
