internal import CNgtcp2
internal import CTransportShims

/// The ngtcp2 and GnuTLS libraries this process runs on (their run-time versions, not the headers'), and what the
/// transport must work around in them. Whether qlog may be enabled on them is PTTTransport's `QlogSafety`, which
/// reads dpkg's status file: the core only reports what it links against.
package enum LinkedNgtcp2 {
    /// The linked ngtcp2's version, e.g. "1.11.0" (`ngtcp2_version(0)`).
    package static let version = String(cString: ngtcp2_version(0).pointee.version_str)
    /// The version the build's ngtcp2 headers name (equal to `version` unless the wrong library was loaded).
    static let headerVersion = String(cString: ptt_ngtcp2_header_version())
    /// The linked ngtcp2's version as 0xMMmmpp.
    package static let versionNumber = UInt32(ngtcp2_version(0).pointee.version_num)
    /// The linked GnuTLS's version, e.g. "3.7.9" (`gnutls_check_version(NULL)`).
    package static let gnutlsVersion = gnutls_check_version(nil).map { String(cString: $0) } ?? "unknown"
    /// Whether the linked generation speaks QUIC v2 (RFC 9369) and compatible version negotiation: 1.x.
    package static let supportsQUICVersion2 = ptt_ngtcp2_supports_v2() != 0
    /// The wire codepoints of QUIC v1 and v2.
    package static let quicVersion1 = UInt32(PTT_QUIC_V1)
    package static let quicVersion2 = UInt32(PTT_QUIC_V2)
    /// One line naming both, for `--version` and the bench header.
    package static var summary: String { "ngtcp2 \(version), GnuTLS \(gnutlsVersion)" }

    /// What the linked library needs worked around (`ptt_ngtcp2_quirks`).
    package struct Quirks: OptionSet, Sendable {
        package let rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }
        /// 0.x paces with the 333 ms initial RTT until the first RTT sample.
        package static let pacesWithInitialRTT = Quirks(rawValue: Int32(PTT_NGTCP2_QUIRK_PACES_WITH_INITIAL_RTT))
        /// Before 1.4.0, retiring a connection ID's sequence number again aborts the process.
        package static let retiresTwice = Quirks(rawValue: Int32(PTT_NGTCP2_QUIRK_RETIRES_TWICE))
        /// Before 1.22.0, a client aborts when a server retires the handshake's connection ID in 0.5-RTT.
        package static let earlyRetirementAsserts = Quirks(
            rawValue: Int32(PTT_NGTCP2_QUIRK_EARLY_RETIREMENT_ASSERTS))
        /// 0.x handles a retired connection ID's expiry only one nanosecond after the time it reports.
        package static let expiryOneEarly = Quirks(rawValue: Int32(PTT_NGTCP2_QUIRK_EXPIRY_ONE_EARLY))
    }
    static let quirks = Quirks(rawValue: ptt_ngtcp2_quirks())
    package static func has(_ quirk: Quirks) -> Bool { quirks.contains(quirk) }
}
