/// Secrets bound to a QUIC version: session tickets and NEW_TOKEN tokens belong to the version of the connection
/// that issued them (RFC 9369 §5), so the relay keys each version's with its own derivation of the master secret.
enum VersionBinding {
    /// The derivation's message: `label` followed by the version's four codepoint bytes.
    static func message(_ label: String, _ version: UInt32) -> [UInt8] {
        Array(label.utf8) + (0..<4).map { UInt8(truncatingIfNeeded: version >> (8 * (3 - $0))) }
    }
}
