import Glibc
import TransportCore

/// Reads the PEM files TLS contexts are made from (certificate chains, private keys, CA bundles): the core takes
/// their bytes, named by path for its messages.
package enum PEMFile {
    /// The bytes of `path`, named by it.
    ///
    /// - Throws: `systemCallFailed` when the process or the system is out of descriptors or memory (a limit, not a
    ///   bad file); `invalidConfiguration` ("cannot read <path>: <reason>") when the file is missing or unreadable.
    package static func read(_ path: String) throws(TransportError) -> PEMData {
        try read(path) { reason in "cannot read \(path): \(reason)" }
    }

    /// The trust of a client whose CAs are the system store (`caFile` nil) or the PEM file at `caFile`.
    ///
    /// - Throws: as `read(_:)`, saying "no CA certificate could be loaded from <path>" when the file is missing or
    ///   unreadable.
    package static func trust(caFile: String?) throws(TransportError) -> TrustAnchors {
        guard let caFile else { return .system }
        return .certificates(
            try read(caFile) { reason in "no CA certificate could be loaded from \(caFile): \(reason)" })
    }

    /// The bytes of `path`; `unreadable` words the error of a missing or unreadable file from the reason.
    private static func read(_ path: String, unreadable: (String) -> String) throws(TransportError) -> PEMData {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(path, errno, unreadable) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw failure(path, errno, unreadable) }
            if count == 0 { return PEMData(bytes, origin: path) }
            bytes.append(contentsOf: chunk.prefix(count))
        }
    }

    /// A descriptor or memory limit is `systemCallFailed` (GnuTLS reported any failure to read a file as a file
    /// error; this tells "out of descriptors" apart from "missing or unreadable file"); anything else is the file's.
    private static func failure(_ path: String, _ code: Int32, _ unreadable: (String) -> String) -> TransportError {
        let reason = String(cString: strerror(code))
        let hint = exhaustionHint(code)
        guard hint.isEmpty else {
            return TransportError(.systemCallFailed, "cannot open \(path): \(reason)\(hint)", libraryCode: Int(code))
        }
        return TransportError(.invalidConfiguration, unreadable(reason))
    }
}
