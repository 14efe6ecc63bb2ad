import Foundation
import TransportCore

/// How long an emulated push takes from the gateway to the phone: a log-normal distribution fitted to a mean and a
/// 95th percentile (VoIP pushes as app developers report them: about 0.8 s mean, 2 s p95), drawn from a seeded
/// generator so a run can be repeated.
public struct PushDelay: Sendable, Hashable {
    /// The mean delay.
    public let mean: Duration
    /// The 95th percentile.
    public let p95: Duration
    /// μ and σ of the underlying normal distribution (of the delay's natural logarithm in seconds).
    public let mu: Double
    public let sigma: Double

    /// A log-normal distribution with this mean and 95th percentile (the p95 must exceed the mean, and be below
    /// e^(1.645²/2) ≈ 3.87 times it, for a log-normal to fit).
    public init(mean: Duration = .milliseconds(800), p95: Duration = .seconds(2)) {
        self.mean = mean
        self.p95 = p95
        let m = Self.seconds(mean)
        let q = Self.seconds(p95)
        // mean = e^(μ + σ²/2), p95 = e^(μ + 1.645 σ)  ⇒  σ²/2 − 1.645 σ + ln(q/m) = 0 (the smaller root).
        let z = 1.6448536269514722
        let discriminant = max(0, z * z - 2 * log(max(q / m, 1.000_001)))
        sigma = z - discriminant.squareRoot()
        mu = log(m) - sigma * sigma / 2
    }

    /// One delay, drawn with `random`.
    public func sample(_ random: inout SeededRandom) -> Duration {
        .nanoseconds(Int64(exp(mu + sigma * random.normal()) * 1e9))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// Seeded draws for delays a run can repeat: the package's SplitMix64, plus normal values.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var mixer: SplitMix64

    /// A generator starting from `seed`.
    public init(seed: UInt64) { mixer = SplitMix64(seed: seed) }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 { mixer.next() }

    /// A standard normal value (Box–Muller).
    public mutating func normal() -> Double {
        let u1 = max(Double(next() >> 11) / Double(1 << 53), 1e-300)
        let u2 = Double(next() >> 11) / Double(1 << 53)
        return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }
}
