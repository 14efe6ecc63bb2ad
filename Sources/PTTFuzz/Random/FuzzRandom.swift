import TransportCore

/// The fuzzer's pseudo-random generator: xoshiro256** (Blackman and Vigna) whose state is filled by SplitMix64
/// from one 64-bit seed. Same seed, same sequence, on every machine; not for cryptography.
public struct FuzzRandom: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    /// A generator determined entirely by `seed`.
    public init(seed: UInt64) {
        var mixer = SplitMix64(seed: seed)
        state = (mixer.next(), mixer.next(), mixer.next(), mixer.next())
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = rotateLeft(state.1 &* 5, 7) &* 9
        let shifted = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= shifted
        state.3 = rotateLeft(state.3, 45)
        return result
    }

    /// A uniform integer in `0..<bound` (`bound` > 0).
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0, "empty range")
        return Int(next(upperBound: UInt64(bound)))
    }

    /// True with probability 1/`denominator`.
    public mutating func oneIn(_ denominator: Int) -> Bool { below(denominator) == 0 }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }

    /// An independent generator for a sub-task (a target), derived from this one's next output.
    public mutating func fork() -> FuzzRandom { FuzzRandom(seed: next()) }

    private func rotateLeft(_ value: UInt64, _ count: UInt64) -> UInt64 {
        (value << count) | (value >> (64 - count))
    }
}
