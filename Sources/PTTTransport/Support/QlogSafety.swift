import Glibc
import TransportCore
import TransportIO

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
enum QlogSafety {
    /// The first upstream release with the CVE-2026-40170 fix.
    static let firstFixedUpstream: UInt32 = 0x01_16_01
    /// Per Debian package of a generation: the first revision with the fix backported.
    static let firstFixedPackages = [
        (package: "libngtcp2-9", version: "0.12.1+dfsg-1+deb12u1"),
        (package: "libngtcp2-16", version: "1.11.0-1+deb13u1"),
    ]

    /// Why qlog must stay off, or nil when it may be enabled.
    static let current: String? = refusal(
        linkedVersion: LinkedNgtcp2.version, linkedNumber: LinkedNgtcp2.versionNumber,
        installed: { DpkgStatus.installedVersion(package: $0) })

    /// Checks that `directory` (when set) can take the connections' qlog files and that the linked ngtcp2 may log
    /// qlog safely.
    ///
    /// - Throws: `invalidConfiguration` when the directory is missing or not writable, or qlog is refused.
    static func check(directory: String?) throws(TransportError) {
        guard let directory else { return }
        try QlogFile.checkDirectory(directory)
        if let current { throw TransportError(.invalidConfiguration, current) }
    }

    /// The factory of one qlog file per connection in `directory` (nil: no qlog); `check` vets the directory.
    static func sinks(directory: String?) -> QlogSinkFactory? {
        directory.map { QlogFile.factory(directory: $0) }
    }

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
}
