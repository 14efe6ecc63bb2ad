/// A set of measurements (milliseconds, or any unit) with order statistics.
///
/// ## Percentile definition
/// Linear interpolation between the closest ranks — Hyndman & Fan type 7, the default of NumPy's `percentile`,
/// R's `quantile` and Excel's `PERCENTILE.INC`. For n samples sorted ascending as x[0] ... x[n-1] and p in
/// [0, 100]:
///
///     h = (n - 1) * p / 100,   k = floor(h),   f = h - k
///     percentile(p) = x[k]                         if f == 0 (in particular p = 0 → min, p = 100 → max)
///                   = x[k] + f * (x[k+1] - x[k])    otherwise
///
/// Examples: for [1, 2, 3, 4, 5], p50 = 3, p25 = 2, p90 = 4.6; for [10, 20], p50 = 15; for one sample s every
/// percentile is s. `(n - 1) * p` is computed before dividing by 100, so ranks that are whole numbers (p50 of an
/// odd count, p90 of 11 samples, ...) are exact and return a sample itself, not a rounded blend.
///
/// Without samples every statistic is nil. A `p` outside [0, 100] is clamped to it; a NaN `p` gives nil.
/// Samples are expected to be finite (a NaN sample makes the order statistics meaningless).
public struct Samples: Sendable, Hashable {
    /// The samples in the order they were added.
    public private(set) var values: [Double] = []

    public init(_ values: [Double] = []) { self.values = values }

    public mutating func append(_ value: Double) { values.append(value) }

    public mutating func append(contentsOf more: some Sequence<Double>) { values.append(contentsOf: more) }

    public var count: Int { values.count }
    public var isEmpty: Bool { values.isEmpty }
    public var min: Double? { values.min() }
    public var max: Double? { values.max() }
    /// The arithmetic mean, or nil without samples.
    public var mean: Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }

    /// The p-th percentile (p in 0...100) by linear interpolation between the closest ranks (see the type's
    /// documentation), or nil without samples or for a NaN `p`.
    public func percentile(_ p: Double) -> Double? {
        guard !values.isEmpty, !p.isNaN else { return nil }
        return Self.percentile(Swift.min(100, Swift.max(0, p)), ofSorted: values.sorted())
    }

    /// Several percentiles at once (one sort), in the order asked; nil without samples or if any `p` is NaN.
    public func percentiles(_ ps: [Double]) -> [Double]? {
        guard !values.isEmpty, !ps.contains(where: \.isNaN) else { return nil }
        let sorted = values.sorted()
        return ps.map { Self.percentile(Swift.min(100, Swift.max(0, $0)), ofSorted: sorted) }
    }

    public var p50: Double? { percentile(50) }
    public var p90: Double? { percentile(90) }
    public var p99: Double? { percentile(99) }

    /// `sorted` non-empty and ascending, `p` in 0...100.
    private static func percentile(_ p: Double, ofSorted sorted: [Double]) -> Double {
        let rank = Double(sorted.count - 1) * p / 100
        let lower = Swift.min(Int(rank.rounded(.down)), sorted.count - 1)
        let fraction = rank - Double(lower)
        if fraction <= 0 || lower + 1 >= sorted.count { return sorted[lower] }
        return sorted[lower] + fraction * (sorted[lower + 1] - sorted[lower])
    }
}
