import TransportCore

/// The C libraries this process runs on, as they report themselves at run time (not the headers it was built
/// with): ngtcp2 (0.12.1 from Debian 12, or 1.x from Debian 13 or bookworm-backports) and GnuTLS.
///
/// `ptt-transport --version` and the benchmark's header print ``summary``, so every figure names the library
/// generation that produced it.
public enum LinkedLibraries {
    /// The linked ngtcp2's version (`ngtcp2_version(0)`), e.g. "0.12.1" or "1.11.0".
    public static var ngtcp2: String { LinkedNgtcp2.version }
    /// The linked GnuTLS's version (`gnutls_check_version(NULL)`), e.g. "3.7.9".
    public static var gnutls: String { LinkedNgtcp2.gnutlsVersion }
    /// Whether QUIC v2 (RFC 9369) is available: ngtcp2 1.0 or later.
    public static var supportsQUICVersion2: Bool { QUICVersion.version2.isSupported }
    /// "ngtcp2 1.11.0, GnuTLS 3.7.9".
    public static var summary: String { LinkedNgtcp2.summary }
    /// Why a `qlogDirectory` is refused with this library, or nil when qlog may be enabled.
    ///
    /// - Important: ngtcp2 before 1.22.1 overflows its stack when it logs a peer's transport parameters to qlog
    ///   (CVE-2026-40170). Debian backported the fix to `libngtcp2-9 0.12.1+dfsg-1+deb12u1` and
    ///   `libngtcp2-16 1.11.0-1+deb13u1`; bookworm-backports' `1.11.0-1~bpo12+1` lacks it. qlog is allowed only on a
    ///   library shown to carry the fix (upstream 1.22.1 or later, or a fixed Debian package that is the one linked).
    public static var qlogRefusal: String? { QlogSafety.current }
    /// Why a ``TransportServer`` refuses 0-RTT on this GnuTLS, or nil when it may accept it.
    ///
    /// - Important: GnuTLS 3.7.9 (Debian 12) before `3.7.9-2+deb12u3` segfaults on the QUIC early-data path
    ///   (`_gnutls13_recv_end_of_early_data`; fixed upstream in 3.7.11 and 3.8.4). A server on such a GnuTLS starts
    ///   with 0-RTT refused (its clients resume in 1-RTT) and ``TransportServer/zeroRTTRefusal`` says why and what
    ///   to install. A 3.7.9 that dpkg did not install cannot be shown to carry Debian's backport and is refused too.
    public static var zeroRTTRefusal: String? { GnuTLSSafety.current.zeroRTTRefusal }
    /// What a relay on this GnuTLS warns about at start, or nil: before `3.7.9-2+deb12u5` (upstream 3.8.10) a client
    /// whose second ClientHello omits the PSK crashes a server that resumes sessions (CVE-2025-6395).
    public static var gnutlsWarning: String? { GnuTLSSafety.current.warning }
    /// The safety checks of the linked libraries, one line each, as `ptt-transport --version` prints them: GnuTLS's
    /// early-data segfault and CVE-2025-6395, and whether qlog is allowed on ngtcp2 (CVE-2026-40170).
    public static var checks: [String] {
        GnuTLSSafety.current.report + [qlogRefusal ?? "ngtcp2 \(ngtcp2): CVE-2026-40170 is fixed: qlog allowed"]
    }
}

extension LinkedLibraries {
    /// The Debian revisions dpkg installed of the linked libraries' packages (`libngtcp2-9` for ngtcp2 0.x,
    /// `libngtcp2-16` for 1.x, `libgnutls30` or `libgnutls30t64`), "none" when the linked one was not installed by
    /// dpkg (e.g. unpacked beside the build), for the admin endpoint's build information. Read once (dpkg's status
    /// file is megabytes: not something to parse at every scrape).
    package static let debianRevisions: (ngtcp2: String, gnutls: String) = {
        let ngtcp2Package = ngtcp2.hasPrefix("0.") ? "libngtcp2-9" : "libngtcp2-16"
        let gnutlsVersion = GnuTLSSafety.packages.lazy.compactMap { DpkgStatus.installedVersion(package: $0) }.first
        let ngtcp2Version = DpkgStatus.installedVersion(package: ngtcp2Package)
        // A dpkg package of another upstream version than the linked one is not the library running.
        let ngtcp2Match = ngtcp2Version.flatMap { $0.hasPrefix(ngtcp2.split(separator: "-")[0]) ? $0 : nil }
        let gnutlsMatch = gnutlsVersion.flatMap { $0.hasPrefix(gnutls) ? $0 : nil }
        return (ngtcp2Match ?? "none", gnutlsMatch ?? "none")
    }()
}
