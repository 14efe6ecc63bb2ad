/// A set of measurements (milliseconds, or any unit) with order statistics.
///
/// Percentiles use linear interpolation between the closest ranks (the "R-7" definition, as NumPy's default):
/// for p in [0, 100] and n sorted samples x[0...n-1], rank h = (n - 1) * p / 100, and the value is
/// x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). One sample gives that sample; none gives nil.
public struct Samples: Sendable, Hashable {
    public private(set) var values: [Double] = []

    public init(_ values: [Double] = []) { self.values = values }

    public mutating func append(_ value: Double) { values.append(value) }

    public var count: Int { values.count }
    public var isEmpty: Bool { values.isEmpty }
    public var min: Double? { values.min() }
    public var max: Double? { values.max() }
    public var mean: Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }

    /// The p-th percentile (0–100), or nil without samples.
    public func percentile(_ p: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Double(sorted.count - 1) * Swift.min(100, Swift.max(0, p)) / 100
        let lower = Int(rank.rounded(.down))
        let upper = Swift.min(lower + 1, sorted.count - 1)
        return sorted[lower] + (rank - Double(lower)) * (sorted[upper] - sorted[lower])
    }

    public var p50: Double? { percentile(50) }
    public var p90: Double? { percentile(90) }
    public var p99: Double? { percentile(99) }
}
