internal import CNgtcp2
import Glibc

/// Appends TLS secrets to a file in the NSS key log format (`LABEL <client_random hex> <secret hex>`), which
/// Wireshark and tshark read to decrypt captured QUIC and TLS sessions. Never reads the file and never rotates it.
///
/// Opened once per TLS context (`O_APPEND`, created with mode 0600) and closed in `deinit`. Every line goes out in a
/// single `write(2)`, and `O_APPEND` makes such a write atomic, so contexts on different threads (or processes) may
/// share one path without interleaving lines.
package final class KeyLogFile: Sendable {
    /// The path the lines go to.
    package let path: String
    private let fd: Int32

    /// Opens (or creates, 0600) `path` for appending.
    ///
    /// - Throws: `invalidConfiguration` when the file cannot be opened (missing directory, no permission).
    package init(path: String) throws(TransportError) {
        guard !path.isEmpty else {
            throw TransportError(.invalidConfiguration, "the key log file path is empty; pass a file path or nil")
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw TransportError(
                .invalidConfiguration, "cannot open the key log file \(path): \(reason)", libraryCode: Int(errno))
        }
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    /// Appends one line. Failures are ignored: a key log is a debugging aid and never fails a handshake.
    package func append(label: String, clientRandom: UnsafeRawBufferPointer, secret: UnsafeRawBufferPointer) {
        var line = [UInt8]()
        line.reserveCapacity(label.utf8.count + 2 * (clientRandom.count + secret.count) + 3)
        line.append(contentsOf: label.utf8)
        line.append(UInt8(ascii: " "))
        Self.appendHex(clientRandom, to: &line)
        line.append(UInt8(ascii: " "))
        Self.appendHex(secret, to: &line)
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
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
    var keyLog: KeyLogFile? { get }
}

/// The GnuTLS key log hook shared by the client and server contexts, over QUIC and TCP.
///
/// The contexts install it only when a key log file is configured: a GnuTLS session starts with the library's
/// default hook, the one that honours the `SSLKEYLOGFILE` environment variable, and keeps it otherwise.
enum KeyLogHook {
    /// Routes `session`'s secrets to `source.keyLog`. The session's db pointer must point at `source`, which must
    /// outlive the session (every session's owner keeps its context alive).
    static func install(_ session: gnutls_session_t) {
        gnutls_session_set_keylog_function(session) { session, label, secret in
            guard let session, let pointer = gnutls_db_get_ptr(session) else { return 0 }
            // Unretained: the context outlives the session (see above).
            let source = Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue() as? KeyLogSource
            if let file = source?.keyLog { KeyLogHook.log(file, session: session, label: label, secret: secret) }
            return 0
        }
    }

    /// Appends the secret GnuTLS derived for `session` under `label`, keyed by the session's client random.
    fileprivate static func log(
        _ file: KeyLogFile, session: gnutls_session_t, label: UnsafePointer<CChar>?,
        secret: UnsafePointer<gnutls_datum_t>?
    ) {
        guard let label, let secret, let secretBytes = secret.pointee.data else { return }
        var clientRandom = gnutls_datum_t()
        var serverRandom = gnutls_datum_t()
        gnutls_session_get_random(session, &clientRandom, &serverRandom)
        guard let random = clientRandom.data, clientRandom.size > 0 else { return }
        file.append(
            label: String(cString: label),
            clientRandom: UnsafeRawBufferPointer(start: random, count: Int(clientRandom.size)),
            secret: UnsafeRawBufferPointer(start: secretBytes, count: Int(secret.pointee.size)))
    }
}
