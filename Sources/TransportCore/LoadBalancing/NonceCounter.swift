/// The nonces of an encrypted QUIC-LB configuration: a big-endian counter from a random start, each value used
/// once (draft-ietf-quic-load-balancers-21 §9.4: a nonce is never reused under one key); nil once every value of
/// its width was handed out.
package struct NonceCounter: Sendable {
    private var value: [UInt8]
    private var remaining: UInt64

    /// Counts on from `start` (its width is the nonce's), for `remaining` values (default: every other value of
    /// that width, until the counter would come back to `start`).
    package init(start: [UInt8], remaining: UInt64? = nil) {
        value = start
        self.remaining = remaining ?? (start.count >= 8 ? UInt64.max : (UInt64(1) << (8 * start.count)) - 1)
    }

    /// The next nonce, or nil when none is left.
    package mutating func next() -> [UInt8]? {
        guard remaining > 0 else { return nil }
        remaining -= 1
        for index in value.indices.reversed() {
            value[index] &+= 1
            if value[index] != 0 { break }
        }
        return value
    }
}
