import Glibc
import TransportCore

/// Writes one QUIC connection's qlog, as ngtcp2 produces it (JSON-SEQ: each record starts with 0x1E), to
/// `<directory>/<original DCID in hex>_<client|server>.sqlog`, the naming the qlog drafts suggest and qvis reads.
/// Never blocks the loop for long: records are buffered and written in batches, then flushed and closed when
/// ngtcp2 says the log is complete (`NGTCP2_QLOG_WRITE_FLAG_FIN`, when the connection is freed); also flushed
/// when the connection closes, so a process that exits right after closing keeps its log.
///
/// - Important: Not thread-safe: used on the thread that owns the connection, from ngtcp2's callback.
package final class QlogFile: QlogSink {
    /// The file this connection's qlog goes to.
    package let path: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    /// Bytes buffered before a write: ngtcp2 calls back once per event, so batching keeps syscalls rare.
    private static let batchSize = 32 * 1024

    /// Creates the file, or returns nil when it cannot be created: a missing qlog never fails a connection (the
    /// directory was checked when the configuration was validated).
    package init?(directory: String, originalDCID: ConnectionID, isClient: Bool) {
        let name = originalDCID.bytes.map { byte in
            String(byte >> 4, radix: 16) + String(byte & 0x0f, radix: 16)
        }.joined()
        path = directory + "/" + name + (isClient ? "_client" : "_server") + ".sqlog"
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        buffer.reserveCapacity(Self.batchSize)
    }

    deinit { finish() }

    /// Takes one chunk from ngtcp2; `fin` flushes and closes the file.
    package func write(_ data: UnsafeRawBufferPointer, fin: Bool) {
        guard fd >= 0 else { return }
        buffer.append(contentsOf: data)
        if fin {
            finish()
        } else if buffer.count >= Self.batchSize {
            flush()
        }
    }

    /// Writes what is buffered (the file stays open for the records that follow).
    package func flush() {
        var offset = 0
        while offset < buffer.count {
            let written = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { break }  // disk full or the like: the rest of this batch is lost
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func finish() {
        guard fd >= 0 else { return }
        flush()
        close(fd)
        fd = -1
    }

    /// A factory of one file per connection in `directory` (for `QUICParameters.qlog`).
    package static func factory(directory: String) -> QlogSinkFactory {
        { originalDCID, isClient in QlogFile(directory: directory, originalDCID: originalDCID, isClient: isClient) }
    }

    /// Checks that `directory` exists and is writable, so connections can create their files.
    package static func checkDirectory(_ directory: String) throws(TransportError) {
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw TransportError(
                .invalidConfiguration, "the qlog directory \(directory) does not exist; create it or pass nil")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw TransportError(
                .invalidConfiguration, "the qlog directory \(directory) is not writable by this process")
        }
    }
}
