import Glibc
import TransportCore

/// Appends TLS secrets to a file in the NSS key log format, which Wireshark and tshark read to decrypt captured
/// QUIC and TLS sessions: the file behind a TLS context's `KeyLogWriter`. Never reads the file and never rotates it.
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

    /// The writer a TLS context takes; it keeps this file open as long as the context holds it.
    package var writer: KeyLogWriter { { line in self.append(line) } }

    /// Appends one complete line in a single `write(2)`. Failures are ignored: a key log is a debugging aid and
    /// never fails a handshake.
    package func append(_ line: [UInt8]) {
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The writer of the key log file at `path`, nil when `path` is nil.
    ///
    /// - Throws: `invalidConfiguration` when the file cannot be opened.
    package static func writer(path: String?) throws(TransportError) -> KeyLogWriter? {
        try path.map { path throws(TransportError) in try KeyLogFile(path: path).writer }
    }
}
