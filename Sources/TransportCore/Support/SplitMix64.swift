/// SplitMix64 (Steele, Lea and Flood): the package's one seeded generator, for whatever must repeat from a seed —
/// emulated loss and reordering, push delays, the fuzzer's seeding, reproducible connection IDs in virtual-clock
/// tests. Never for keys or anything a peer must not predict (`SecureRandom`, `SystemRandom`).
package struct SplitMix64: RandomNumberGenerator, Sendable {
    package var state: UInt64

    /// A generator starting at `seed`.
    package init(seed: UInt64) { state = seed }

    /// The next 64 well-mixed bits.
    package mutating func next() -> UInt64 { Self.next(&state) }

    /// A uniform value in [0, 1).
    package mutating func uniform() -> Double { Self.uniform(&state) }

    /// The step on a bare state (for a type that keeps several independent streams as `UInt64`s).
    package static func next(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) from a bare state.
    package static func uniform(_ state: inout UInt64) -> Double {
        Double(next(&state) >> 11) / Double(UInt64(1) << 53)
    }
}
