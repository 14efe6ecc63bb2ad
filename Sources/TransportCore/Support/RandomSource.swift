/// Where the core's non-key randomness comes from: connection IDs, stateless-reset tokens of connections without a
/// reset secret, stateless resets' random bytes, QUIC-LB nonces and ngtcp2's `rand` callback. The default is the
/// kernel's generator (`SystemRandom`); a test of the virtual-clock network injects a seeded one, so two runs with
/// the same seed issue the same connection IDs. Keys (session-ticket keys, server secrets) never come from here.
package protocol RandomSource: Sendable {
    /// Fills `buffer` with random bytes.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// `count` random bytes.
    package func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// One random byte.
    package func byte() -> UInt8 { bytes(1)[0] }
}

/// The kernel's cryptographically secure generator (`SecureRandom`): the default `RandomSource`.
package struct SystemRandom: RandomSource {
    package init() {}

    package func fill(_ buffer: UnsafeMutableRawBufferPointer) { SecureRandom.fill(buffer) }
}
