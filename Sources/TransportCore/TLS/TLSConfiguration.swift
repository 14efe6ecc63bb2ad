/// Where a client finds the certificate authorities it trusts.
public enum TrustRoots: Hashable, Sendable {
    /// The system store (Debian: /etc/ssl/certs via GnuTLS' default trust).
    case system
    /// A PEM file of CA certificates, e.g. `certs/ca.pem`.
    case caFile(String)
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
