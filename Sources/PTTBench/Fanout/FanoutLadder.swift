/// The capacity-fanout decision, without any I/O: which listener counts to try, whether a step passed, and what
/// to report once the climb stopped.
struct FanoutLadder: Sendable {
    /// What one step (K listeners for a few seconds) measured.
    struct Step: Sendable, Equatable {
        var listeners: Int
        /// Frames the talker sent inside the measured window.
        var framesSent: Int
        /// Frame deliveries counted over all listeners (at most `framesSent * listeners`).
        var delivered: Int
        /// Talker send to listener receive, milliseconds (nil: nothing arrived).
        var p50Milliseconds: Double?
        var p99Milliseconds: Double?

        /// Lost deliveries as a percentage of the expected `framesSent * listeners` (100 when nothing was expected).
        var lossPercent: Double {
            let expected = framesSent * listeners
            guard expected > 0 else { return 100 }
            return Double(max(0, expected - delivered)) / Double(expected) * 100
        }
    }

    /// A step passes with loss strictly below `maxLossPercent` and p99 strictly below `maxP99Milliseconds`.
    struct Criteria: Sendable {
        var maxLossPercent = 1.0
        var maxP99Milliseconds = 5.0

        func passes(_ step: Step) -> Bool {
            guard let p99 = step.p99Milliseconds else { return false }
            return step.lossPercent < maxLossPercent && p99 < maxP99Milliseconds
        }

        var description: String {
            "a step passes with loss < \(BenchReport.format(maxLossPercent)) % and p99 talker-to-listener latency "
                + "< \(BenchReport.format(maxP99Milliseconds)) ms"
        }
    }

    /// The full climb (3 s steps), and the short one for quick runs (1 s steps; `--iterations` below 10, e.g. the
    /// smoke test).
    static let full = [10, 25, 50, 75, 100, 150, 250, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000, 16000]
    static let quick = [5, 10, 25]

    var counts: [Int]
    var criteria = Criteria()
    private(set) var steps: [Step] = []

    init(counts: [Int], criteria: Criteria = Criteria()) {
        self.counts = counts
        self.criteria = criteria
    }

    /// The listener count to measure next, or nil when the climb is over (a step failed or the ladder ended).
    var next: Int? {
        if let last = steps.last, !criteria.passes(last) { return nil }
        return steps.count < counts.count ? counts[steps.count] : nil
    }

    mutating func record(_ step: Step) { steps.append(step) }

    /// The last step that passed before the first failure (nil when the first step failed or none ran).
    var lastPassing: Step? { steps.prefix { criteria.passes($0) }.last }

    /// The first failing step (nil while every step passed).
    var firstFailing: Step? { steps.first { !criteria.passes($0) } }

    /// The largest listener count sustained: the last passing step's, 0 when the first step failed.
    var maxSustained: Int { lastPassing?.listeners ?? 0 }
}
