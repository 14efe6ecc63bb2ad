import TransportCore
import TransportIO

/// Where a client finds the certificate authorities it trusts.
public enum TrustRoots: Hashable, Sendable {
    /// The system store (Debian: /etc/ssl/certs via GnuTLS' default trust).
    case system
    /// A PEM file of CA certificates, e.g. `certs/ca.pem`, read when a connection first needs it.
    case caFile(String)
    /// CA certificates in PEM, already in memory (e.g. bundled with the application).
    case caCertificates([UInt8])

    /// The core's trust: the system store, or the CA file's bytes.
    ///
    /// - Throws: `invalidConfiguration` when the CA file is missing or unreadable (`systemCallFailed` when the
    ///   process is out of descriptors).
    package func anchors() throws(TransportError) -> TrustAnchors {
        switch self {
        case .system: .system
        case .caFile(let path): try PEMFile.trust(caFile: path)
        case .caCertificates(let bytes): .certificates(PEMData(bytes, origin: "the CA certificates given"))
        }
    }
}
