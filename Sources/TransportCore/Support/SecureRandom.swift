import Glibc

/// Random bytes from the kernel's generator (`arc4random_buf`, glibc's wrapper over `getrandom`), one request per
/// call: behind `SystemRandom`, the default `RandomSource` of connection IDs, reset tokens and ngtcp2's `rand`
/// callback. Drawing them a byte at a time from `SystemRandomNumberGenerator` cost one system call per byte, over a
/// hundred per accepted connection.
package enum SecureRandom {
    /// Fills `buffer` with random bytes.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        arc4random_buf(base, buffer.count)
    }

    /// `count` random bytes.
    package static func bytes(_ count: Int) -> [UInt8] { SystemRandom().bytes(count) }
}
