internal import CNgtcp2

/// HMAC-SHA256 from GnuTLS, for the secrets this package derives (stateless-reset and token keys, the fleet's trunk
/// proofs), and a comparison of MACs that takes the same time wherever they differ.
package enum HMACSHA256 {
    /// HMAC-SHA256(`key`, `message`): 32 bytes; nil when GnuTLS fails.
    package static func mac(key: [UInt8], message: [UInt8]) -> [UInt8]? {
        var derived = [UInt8](repeating: 0, count: 32)
        let rv = message.withUnsafeBytes { text in
            derived.withUnsafeMutableBytes {
                gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key.count, text.baseAddress, text.count, $0.baseAddress)
            }
        }
        return rv == 0 ? derived : nil
    }

    /// Whether `a` and `b` are equal, in a time that depends on their lengths only (a MAC check leaks no prefix).
    package static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
