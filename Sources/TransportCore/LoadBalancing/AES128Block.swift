internal import CNgtcp2

/// AES-128 on single 16-byte blocks (what QUIC-LB calls AES-ECB), on one GnuTLS cipher handle made once per key.
/// GnuTLS offers no ECB mode; one block of CBC with a zero IV is the same computation, so the IV is reset to zero
/// before every block. Not thread-safe (the handle carries the IV): one instance per event loop.
final class AES128Block {
    private var encryptor: gnutls_cipher_hd_t?
    private var decryptor: gnutls_cipher_hd_t?
    private static let zeroIV = [UInt8](repeating: 0, count: 16)

    /// - Throws: `invalidConfiguration` when `key` is not 16 bytes, `tlsFailure` when GnuTLS refuses the cipher.
    init(key: [UInt8]) throws(TransportError) {
        guard key.count == 16 else {
            throw TransportError(.invalidConfiguration, "an AES-128 key has 16 bytes, not \(key.count)")
        }
        encryptor = try Self.handle(key: key)
        do {
            decryptor = try Self.handle(key: key)
        } catch {
            gnutls_cipher_deinit(encryptor)
            throw error
        }
    }

    deinit {
        gnutls_cipher_deinit(encryptor)
        gnutls_cipher_deinit(decryptor)
    }

    private static func handle(key: [UInt8]) throws(TransportError) -> gnutls_cipher_hd_t? {
        var handle: gnutls_cipher_hd_t?
        var key = key
        var iv = zeroIV
        let rv = key.withUnsafeMutableBytes { keyBytes in
            iv.withUnsafeMutableBytes { ivBytes in
                var keyDatum = gnutls_datum_t(data: keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), size: 16)
                var ivDatum = gnutls_datum_t(data: ivBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), size: 16)
                return gnutls_cipher_init(&handle, GNUTLS_CIPHER_AES_128_CBC, &keyDatum, &ivDatum)
            }
        }
        try gnutlsCheck(rv, "gnutls_cipher_init (AES-128)")
        return handle
    }

    /// Encrypts the 16 bytes at `block` in place.
    func encrypt(_ block: UnsafeMutableRawPointer) {
        resetIV(encryptor)
        _ = gnutls_cipher_encrypt(encryptor, block, 16)
    }

    private func resetIV(_ handle: gnutls_cipher_hd_t?) {
        var iv = (UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &iv) { gnutls_cipher_set_iv(handle, $0.baseAddress, 16) }
    }

    /// Decrypts the 16 bytes at `block` in place.
    func decrypt(_ block: UnsafeMutableRawPointer) {
        resetIV(decryptor)
        _ = gnutls_cipher_decrypt(decryptor, block, 16)
    }
}
