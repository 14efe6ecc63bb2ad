internal import CNgtcp2
internal import CTransportShims
import Glibc

/// The ngtcp2 and GnuTLS libraries this process runs on (their run-time versions, not the headers'), what the
/// transport must work around in them, and whether qlog may be enabled.
///
/// qlog and CVE-2026-40170: ngtcp2 before 1.22.1 (upstream fix 708a7640) overflows its stack when it logs a peer's
/// transport parameters to qlog, and a peer reaches it as soon as a qlog writer is set. Debian backported the fix to
/// the packages its stable releases ship; the changelogs (`usr/share/doc/<package>/changelog.Debian.gz`) read:
/// - `libngtcp2-9 0.12.1+dfsg-1+deb12u1` (Debian 12): "Backport patch for CVE-2026-40170 (closes: #1134197)".
/// - `libngtcp2-16 1.11.0-1+deb13u1` (Debian 13, trixie-security): the same entry.
/// - `libngtcp2-16 1.11.0-1~bpo12+1` (bookworm-backports, the 1.11 CI builds against): no such entry; its newest
///   is "Rebuild for bookworm-backports" over 1.11.0-1, so it lacks the fix, and sorts before `1.11.0-1+deb13u1`.
///
/// So qlog is allowed when the linked library is 1.22.1 or later, or when dpkg installed the package of the linked
/// generation at a fixed Debian revision and that package's upstream version is the one running (the library came
/// from that package). Anything else (a library unpacked outside dpkg, as `.ci/ngtcp2-backports` does, or built
/// from source below 1.22.1) cannot be shown to carry the fix, and qlog is refused.
package enum LinkedNgtcp2 {
    /// The linked ngtcp2's version, e.g. "1.11.0" (`ngtcp2_version(0)`).
    package static let version = String(cString: ngtcp2_version(0).pointee.version_str)
    /// The version the build's ngtcp2 headers name (equal to `version` unless the wrong library was loaded).
    static let headerVersion = String(cString: ptt_ngtcp2_header_version())
    /// The linked ngtcp2's version as 0xMMmmpp.
    static let versionNumber = UInt32(ngtcp2_version(0).pointee.version_num)
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

    /// The first upstream release with the CVE-2026-40170 fix.
    static let firstFixedUpstream: UInt32 = 0x01_16_01
    /// Per Debian package of a generation: the first revision with the fix backported.
    static let firstFixedPackages = [
        (package: "libngtcp2-9", version: "0.12.1+dfsg-1+deb12u1"),
        (package: "libngtcp2-16", version: "1.11.0-1+deb13u1"),
    ]

    /// Why qlog must stay off, or nil when it may be enabled.
    package static let qlogRefusal: String? = refusal(
        linkedVersion: version, linkedNumber: versionNumber,
        installed: { installedVersion(package: $0) })

    /// The refusal for a linked library of `linkedVersion` (`linkedNumber`), with `installed` giving dpkg's version
    /// of a package (nil: not installed).
    static func refusal(linkedVersion: String, linkedNumber: UInt32, installed: (String) -> String?) -> String? {
        if linkedNumber >= firstFixedUpstream { return nil }
        let prefix = "qlog is refused: ngtcp2 \(linkedVersion) lacks the fix for CVE-2026-40170 (a peer can overflow "
        for (package, firstFixed) in firstFixedPackages {
            guard let installedVersion = installed(package), DebianVersion.upstream(installedVersion) == linkedVersion
            else { continue }
            if DebianVersion.compare(installedVersion, firstFixed) >= 0 { return nil }
            return prefix + "the stack when qlog is on): the installed \(package) \(installedVersion) predates "
                + "\(firstFixed); upgrade it"
        }
        return prefix + "the stack when qlog is on), and no installed Debian package that carries the backported fix "
            + "is the one linked (a library unpacked outside dpkg, such as bookworm-backports' 1.11.0-1~bpo12+1, or "
            + "built from source before 1.22.1)"
    }

    /// The version of an installed package, from dpkg's status file (nil: not installed by dpkg).
    static func installedVersion(package name: String, statusFile: String = "/var/lib/dpkg/status") -> String? {
        guard let file = fopen(statusFile, "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var inPackage = false
        var installed = false
        var version: String?
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line).trimmingSuffixNewline
            if text.isEmpty {
                if inPackage, installed, let version { return version }
                inPackage = false
                installed = false
                version = nil
            } else if text.hasPrefix("Package: ") {
                inPackage = text.dropFirst(9) == name
            } else if inPackage, text.hasPrefix("Status: ") {
                installed = text.hasSuffix(" installed")
            } else if inPackage, text.hasPrefix("Version: ") {
                version = String(text.dropFirst(9))
            }
        }
        return inPackage && installed ? version : nil
    }
}

extension String {
    fileprivate var trimmingSuffixNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}

/// Debian version ordering (`[epoch:]upstream[-revision]`, `~` sorting before everything), as dpkg compares.
enum DebianVersion {
    /// Negative, zero or positive as `a` sorts before, equal to or after `b`.
    static func compare(_ a: String, _ b: String) -> Int {
        let (epochA, upstreamA, revisionA) = split(a)
        let (epochB, upstreamB, revisionB) = split(b)
        if epochA != epochB { return epochA < epochB ? -1 : 1 }
        let upstream = compareParts(Array(upstreamA.utf8), Array(upstreamB.utf8))
        return upstream != 0 ? upstream : compareParts(Array(revisionA.utf8), Array(revisionB.utf8))
    }

    /// The upstream part without a Debian repack suffix: "0.12.1" for "0.12.1+dfsg-1+deb12u1".
    static func upstream(_ version: String) -> String {
        let upstream = split(version).1
        return String(upstream.prefix { $0 != "+" && $0 != "~" })
    }

    private static func split(_ version: String) -> (Int, Substring, Substring) {
        var rest = Substring(version)
        var epoch = 0
        if let colon = rest.firstIndex(of: ":") {
            epoch = Int(rest[..<colon]) ?? 0
            rest = rest[rest.index(after: colon)...]
        }
        guard let dash = rest.lastIndex(of: "-") else { return (epoch, rest, "") }
        return (epoch, rest[..<dash], rest[rest.index(after: dash)...])
    }

    /// dpkg's `verrevcmp`: alternating non-digit runs (compared by `order`) and digit runs (compared as numbers).
    private static func compareParts(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var i = 0
        var j = 0
        func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
        func order(_ c: UInt8?) -> Int {
            guard let c else { return 0 }
            if isDigit(c) { return 0 }
            if (c >= 65 && c <= 90) || (c >= 97 && c <= 122) { return Int(c) }
            if c == UInt8(ascii: "~") { return -1 }
            return Int(c) + 256
        }
        while i < a.count || j < b.count {
            while (i < a.count && !isDigit(a[i])) || (j < b.count && !isDigit(b[j])) {
                let left = order(i < a.count ? a[i] : nil)
                let right = order(j < b.count ? b[j] : nil)
                if left != right { return left - right }
                i += 1
                j += 1
            }
            while i < a.count && a[i] == 48 { i += 1 }
            while j < b.count && b[j] == 48 { j += 1 }
            var firstDifference = 0
            while i < a.count && isDigit(a[i]) && j < b.count && isDigit(b[j]) {
                if firstDifference == 0 { firstDifference = Int(a[i]) - Int(b[j]) }
                i += 1
                j += 1
            }
            if i < a.count && isDigit(a[i]) { return 1 }
            if j < b.count && isDigit(b[j]) { return -1 }
            if firstDifference != 0 { return firstDifference }
        }
        return 0
    }
}
