/// PEM text (certificates or a private key) handed to a TLS context, and where it came from: the core reads no
/// file, so the layer above reads it and names its origin for the messages of a PEM that does not load.
package struct PEMData: Sendable, Hashable {
    /// The PEM text's bytes.
    package var bytes: [UInt8]
    /// Where the bytes came from, as messages name it: a file's path, or a description.
    package var origin: String

    package init(_ bytes: [UInt8], origin: String = "the PEM data given") {
        self.bytes = bytes
        self.origin = origin
    }
}

/// The certificate authorities a client context trusts.
package enum TrustAnchors: Sendable, Hashable {
    /// The system store (Debian: /etc/ssl/certs via GnuTLS' default trust).
    case system
    /// CA certificates in PEM.
    case certificates(PEMData)
}

/// TLS 1.3 parameters shared by QUIC and QMux, so both paths apply the identical policy.
package enum TLSPolicy {
    /// TLS 1.3 only, AEADs QUIC allows, no middlebox compatibility mode (RFC 9001 §8.4).
    package static let priority =
        "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:" + groups

    /// `priority` offering TLS_CHACHA20_POLY1305_SHA256 only (the interop runner's chacha20 case).
    package static let chacha20Only = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305:" + groups

    private static let groups =
        "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:%DISABLE_TLS13_COMPAT_MODE"
}
