import Synchronization
import TransportCore

/// A reproducible `RandomSource` for virtual-clock tests: SplitMix64 from a seed, so two runs with one seed draw
/// the same bytes (connection IDs, ngtcp2's `rand`). Never for keys: it is predictable by design.
final class SeededRandom: RandomSource {
    private let state: Mutex<UInt64>

    init(seed: UInt64) { state = Mutex(seed) }

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        state.withLock { state in
            var word: UInt64 = 0
            for index in buffer.indices {
                if index % 8 == 0 { word = Self.next(&state) }
                buffer[index] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
            }
        }
    }

    /// SplitMix64's step.
    private static func next(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
