internal import CNgtcp2

/// Where a TLS context's session secrets go: one complete line of the NSS key log format at a time
/// (`LABEL <client_random hex> <secret hex>\n`, which Wireshark and tshark read to decrypt captured QUIC and TLS
/// sessions). The layer above gives it (TransportIO's `KeyLogFile` appends to a file); the core never opens a file.
///
/// Called on whichever thread runs a handshake, from GnuTLS' key log hook: it must not block for long and must
/// not throw; a key log is a debugging aid and never fails a handshake.
package typealias KeyLogWriter = @Sendable (_ line: [UInt8]) -> Void

/// The NSS key log format.
package enum KeyLogLine {
    /// One line: `label`, the session's client random and the secret in lower-case hex, then a newline.
    package static func format(
        label: String, clientRandom: UnsafeRawBufferPointer, secret: UnsafeRawBufferPointer
    ) -> [UInt8] {
        var line = [UInt8]()
        line.reserveCapacity(label.utf8.count + 2 * (clientRandom.count + secret.count) + 3)
        line.append(contentsOf: label.utf8)
        line.append(UInt8(ascii: " "))
        appendHex(clientRandom, to: &line)
        line.append(UInt8(ascii: " "))
        appendHex(secret, to: &line)
        line.append(UInt8(ascii: "\n"))
        return line
    }

    private static func appendHex(_ bytes: UnsafeRawBufferPointer, to line: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        for byte in bytes {
            line.append(digits[Int(byte >> 4)])
            line.append(digits[Int(byte & 0x0f)])
        }
    }
}

/// A TLS context that may log its sessions' secrets; GnuTLS sessions point at it through their db pointer.
protocol KeyLogSource: AnyObject {
    /// Where the secrets go (nil: nowhere, unless GnuTLS honours `SSLKEYLOGFILE`).
    var keyLog: KeyLogWriter? { get }
}

/// The GnuTLS key log hook shared by the client and server contexts, over QUIC and TCP.
///
/// The contexts install it only when a key log writer is given: a GnuTLS session starts with the library's
/// default hook, the one that honours the `SSLKEYLOGFILE` environment variable, and keeps it otherwise.
enum KeyLogHook {
    /// Routes `session`'s secrets to `source.keyLog`. The session's db pointer must point at `source`, which must
    /// outlive the session (every session's owner keeps its context alive).
    static func install(_ session: gnutls_session_t) {
        gnutls_session_set_keylog_function(session) { session, label, secret in
            guard let session, let pointer = gnutls_db_get_ptr(session) else { return 0 }
            // Unretained: the context outlives the session (see above).
            let source = Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue() as? KeyLogSource
            if let writer = source?.keyLog { KeyLogHook.log(writer, session: session, label: label, secret: secret) }
            return 0
        }
    }

    /// Appends the secret GnuTLS derived for `session` under `label`, keyed by the session's client random.
    fileprivate static func log(
        _ writer: KeyLogWriter, session: gnutls_session_t, label: UnsafePointer<CChar>?,
        secret: UnsafePointer<gnutls_datum_t>?
    ) {
        guard let label, let secret, let secretBytes = secret.pointee.data else { return }
        var clientRandom = gnutls_datum_t()
        var serverRandom = gnutls_datum_t()
        gnutls_session_get_random(session, &clientRandom, &serverRandom)
        guard let random = clientRandom.data, clientRandom.size > 0 else { return }
        writer(
            KeyLogLine.format(
                label: String(cString: label),
                clientRandom: UnsafeRawBufferPointer(start: random, count: Int(clientRandom.size)),
                secret: UnsafeRawBufferPointer(start: secretBytes, count: Int(secret.pointee.size))))
    }
}
