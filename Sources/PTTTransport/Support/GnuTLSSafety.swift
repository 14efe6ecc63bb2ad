/// Two bugs of GnuTLS that a relay serving 0-RTT and resumption reaches, and the revisions that fix them, checked at
/// start as `QlogSafety` checks ngtcp2 (issue 31, item 12):
/// - A segfault in `_gnutls13_recv_end_of_early_data()` (and a potential one in `_gnutls13_recv_finished()`), on
///   the QUIC early-data path (`GNUTLS_NO_END_OF_EARLY_DATA`): fixed upstream in 3.7.11 and 3.8.4. Debian 12
///   backported it to 3.7.9 in `3.7.9-2+deb12u3` (its changelog: "Update to 3.7.11", patches 63_04 and 63_05). Below
///   it the relay refuses 0-RTT (its clients still resume, in 1-RTT) and says what to install.
/// - CVE-2025-6395 (GNUTLS-SA-2025-07-07-4): a NULL dereference when a second ClientHello (after a
///   HelloRetryRequest) omits the PSK the first one offered, so any client can crash a server that resumes sessions,
///   0-RTT or not: fixed upstream in 3.8.10, in Debian 12 in `3.7.9-2+deb12u5`. Below it the relay warns.
///
/// The revision counts when dpkg installed the GnuTLS package whose upstream version is the one running (the library
/// came from it). Otherwise the upstream version alone decides, and a 3.7.9 that dpkg did not install (built from
/// source, unpacked elsewhere) cannot be shown to carry Debian's backport: 0-RTT is refused.
enum GnuTLSSafety {
    /// What the checks found.
    struct Assessment: Equatable, Sendable {
        /// Why 0-RTT must stay off, and what to install; nil when it may be on.
        var zeroRTTRefusal: String?
        /// What to warn about at start, and what to install; nil when nothing.
        var warning: String?
        /// One line per check, as `ptt-transport --version` prints them.
        var report: [String]
    }

    /// The Debian packages of the GnuTLS runtime library (Debian 13 renamed it for the 64-bit time_t transition).
    static let packages = ["libgnutls30", "libgnutls30t64"]
    /// Debian 12's 3.7.9: the first revision with the early-data segfault fixed, and with CVE-2025-6395 fixed.
    static let earlyDataFixedRevision = "3.7.9-2+deb12u3"
    static let cve20256395FixedRevision = "3.7.9-2+deb12u5"

    /// The assessment of the GnuTLS this process runs on, from dpkg's status file.
    static let current = assess(linkedVersion: LinkedLibraries.gnutls, statusFile: DpkgStatus.defaultFile)

    /// The assessment for a linked GnuTLS of `linkedVersion`, with dpkg's status file at `statusFile` (tests point
    /// it at old revisions).
    static func assess(linkedVersion: String, statusFile: String) -> Assessment {
        assess(linkedVersion: linkedVersion) { DpkgStatus.installedVersion(package: $0, statusFile: statusFile) }
    }

    /// The assessment for a linked GnuTLS of `linkedVersion`, with `installed` giving dpkg's version of a package
    /// (nil: not installed).
    static func assess(linkedVersion: String, installed: (String) -> String?) -> Assessment {
        var package: (name: String, version: String)?
        for name in packages {
            if let version = installed(name), DebianVersion.upstream(version) == linkedVersion {
                package = (name, version)
                break
            }
        }
        let source = package.map { "GnuTLS \(linkedVersion) (\($0.name) \($0.version))" } ?? "GnuTLS \(linkedVersion)"
        let segfaultFixed: Bool
        let cveFixed: Bool
        if let package, linkedVersion == "3.7.9" {
            segfaultFixed = DebianVersion.compare(package.version, earlyDataFixedRevision) >= 0
            cveFixed = DebianVersion.compare(package.version, cve20256395FixedRevision) >= 0
        } else {
            let upstream = linkedVersion
            segfaultFixed =
                DebianVersion.compare(upstream, "3.8.4") >= 0
                || (DebianVersion.compare(upstream, "3.7.11") >= 0 && DebianVersion.compare(upstream, "3.8") < 0)
            cveFixed = DebianVersion.compare(upstream, "3.8.10") >= 0
        }
        let install = { (revision: String, upstream: String) -> String in
            linkedVersion == "3.7.9"
                ? "install \(package?.name ?? "libgnutls30") \(revision) or later (Debian 12's security updates)"
                    + (package == nil ? ", the package this library must come from," : "")
                    + " or GnuTLS \(upstream) or later"
                : "install GnuTLS \(upstream) or later"
        }
        var assessment = Assessment(report: [])
        if segfaultFixed {
            assessment.report.append("\(source): the early-data segfault is fixed: 0-RTT allowed")
        } else {
            let refusal =
                "0-RTT is refused: \(source) lacks the fix for a segfault on the QUIC early-data path "
                + "(_gnutls13_recv_end_of_early_data), which a client's 0-RTT reaches; "
                + install(earlyDataFixedRevision, "3.8.4") + "; clients still resume, in 1-RTT"
            assessment.zeroRTTRefusal = refusal
            assessment.report.append(refusal)
        }
        if cveFixed {
            assessment.report.append("\(source): CVE-2025-6395 is fixed")
        } else {
            let warning =
                "warning: \(source) lacks the fix for CVE-2025-6395 (a client whose second ClientHello omits the "
                + "PSK its first one offered crashes a server that resumes sessions); "
                + install(cve20256395FixedRevision, "3.8.10")
            assessment.warning = warning
            assessment.report.append(warning)
        }
        return assessment
    }
}
