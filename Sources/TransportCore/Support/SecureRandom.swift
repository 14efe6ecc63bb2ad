internal import CNgtcp2
import Glibc

/// Random bytes from GnuTLS's generator (`gnutls_rnd` at `GNUTLS_RND_RANDOM`: a per-thread DRBG in user space, seeded
/// and reseeded from the kernel, fork-safe), one request per call; the kernel's (`arc4random_buf`, glibc's wrapper
/// over `getrandom`) when GnuTLS refuses. Behind `SystemRandom`, the default `RandomSource` of connection IDs, reset
/// tokens and ngtcp2's `rand` callback. Drawing them a byte at a time from `SystemRandomNumberGenerator` cost one
/// system call per byte, over a hundred per accepted connection; `arc4random_buf` still cost one per request, about
/// five per accepted connection (its connection IDs and ngtcp2's draws), which a wake storm of 1,000 phones pays
/// 5,000 times on the relay's loops.
package enum SecureRandom {
    /// Fills `buffer` with random bytes.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        if gnutls_rnd(GNUTLS_RND_RANDOM, base, buffer.count) != 0 { arc4random_buf(base, buffer.count) }
    }

    /// `count` random bytes.
    package static func bytes(_ count: Int) -> [UInt8] { SystemRandom().bytes(count) }
}
