internal import CNgtcp2

/// Ticket-key rotation with overlap, on GnuTLS 3.7.9 which takes one ticket key per session.
///
/// GnuTLS derives the key that actually encrypts tickets from the 64-byte master key: SHA3-512 of the big-endian
/// period number T = ⌊unix time / (expire_time × 3)⌋ followed by the master key (lib/stek.c, `totp_sha3`;
/// expire_time is 21600 s unless `gnutls_db_set_cache_expiration` changes it, so T advances every 18 hours). It
/// accepts tickets of periods T and T−1. The first 16 bytes of a derived key are its name, and every GnuTLS
/// ticket — the PSK identity a resuming ClientHello carries — starts with that name (`key_name`).
///
/// To keep accepting tickets of a retired master key, the server looks at the ClientHello before GnuTLS does (a
/// PRE hook): when the first PSK identity's name belongs to the previous master key and not to the current one,
/// the session switches to the previous key — legal then, because GnuTLS fixes the key on its first use. Tickets
/// that connection receives are then sealed with the previous key too; the client's next state after the
/// overlap ends falls back to a full handshake once, never to a failure.
package enum TicketKeySelection {
    package static let keyNameSize = 16
    static let rotationPeriod: UInt64 = 21600 * 3

    /// The key names GnuTLS accepts for `masterKey` at `unixTime` (periods T and T−1).
    static func acceptedNames(masterKey: UnsafeRawBufferPointer, unixTime: UInt64) -> [[UInt8]] {
        let period = unixTime / rotationPeriod
        return [period, period &- 1].map { derivedName(masterKey: masterKey, period: $0) }
    }

    static func derivedName(masterKey: UnsafeRawBufferPointer, period: UInt64) -> [UInt8] {
        var input = (0..<8).map { UInt8(truncatingIfNeeded: period >> (56 - 8 * $0)) }
        input += masterKey
        var digest = [UInt8](repeating: 0, count: 64)
        let rv = input.withUnsafeBytes { bytes in
            digest.withUnsafeMutableBytes { out in
                gnutls_hash_fast(GNUTLS_DIG_SHA3_512, bytes.baseAddress, bytes.count, out.baseAddress)
            }
        }
        return rv == 0 ? Array(digest.prefix(keyNameSize)) : []
    }

    /// The first `keyNameSize` bytes of the first PSK identity in a ClientHello body, or nil (no
    /// pre_shared_key extension, or a malformed message: GnuTLS then reports the error itself).
    package static func firstPSKIdentityPrefix(clientHello body: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let first = pskIdentities(clientHello: body)?.first, first.count >= keyNameSize else { return nil }
        return Array(first.prefix(keyNameSize))
    }

    /// The PSK identities (tickets) a ClientHello body offers, in order, or nil (no pre_shared_key extension, or
    /// a malformed one).
    static func pskIdentities(clientHello body: UnsafeRawBufferPointer) -> [[UInt8]]? {
        offer(clientHello: body).tickets
    }

    /// What a ClientHello body offers for resumption: its PSK identities (tickets) in order (nil: no
    /// pre_shared_key extension, or a malformed one), and whether it has the early_data extension.
    static func offer(clientHello body: UnsafeRawBufferPointer) -> (tickets: [[UInt8]]?, earlyData: Bool) {
        var reader = TLSMessageReader(bytes: body)
        guard reader.skip(2 + 32), reader.skipVector(lengthBytes: 1), reader.skipVector(lengthBytes: 2),
            reader.skipVector(lengthBytes: 1), let extensionsLength = reader.number(2)
        else { return (nil, false) }
        let end = min(reader.offset + extensionsLength, body.count)
        var earlyData = false
        while reader.offset + 4 <= end {
            guard let type = reader.number(2), let length = reader.number(2) else { return (nil, earlyData) }
            guard type == 41 else {  // pre_shared_key (the last extension, RFC 8446 §4.2.11)
                if type == 42 { earlyData = true }
                guard reader.skip(length) else { return (nil, earlyData) }
                continue
            }
            guard let listLength = reader.number(2) else { return (nil, earlyData) }
            let listEnd = reader.offset + listLength
            var identities: [[UInt8]] = []
            while reader.offset < listEnd {
                guard let identityLength = reader.number(2), let identity = reader.take(identityLength),
                    reader.skip(4)  // obfuscated_ticket_age
                else { return (nil, earlyData) }
                identities.append(identity)
            }
            return (identities.isEmpty ? nil : identities, earlyData)
        }
        return (nil, earlyData)
    }
}
