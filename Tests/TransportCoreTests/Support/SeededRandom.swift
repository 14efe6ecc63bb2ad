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
                if index % 8 == 0 { word = SplitMix64.next(&state) }
                buffer[index] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
            }
        }
    }
}
