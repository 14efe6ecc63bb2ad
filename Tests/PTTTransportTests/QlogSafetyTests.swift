import Foundation
import Testing

@testable import PTTTransport

/// The CVE-2026-40170 guard: Debian version ordering and the dpkg status lookup behind it.
@Suite("qlog safety check")
struct QlogSafetyTests {
    @Test(arguments: [
        ("0.12.1+dfsg-1", "0.12.1+dfsg-1+deb12u1", -1),
        ("0.12.1+dfsg-1+deb12u1", "0.12.1+dfsg-1+deb12u1", 0),
        ("0.12.1+dfsg-1+deb12u2", "0.12.1+dfsg-1+deb12u1", 1),
        ("0.12.0-1", "0.12.1+dfsg-1+deb12u1", -1),
        ("1.4.0-1", "0.12.1+dfsg-1+deb12u1", 1),
        ("1.11.0-1~bpo12+1", "1.11.0-1+deb13u1", -1),
        ("1.11.0-1+deb13u1", "1.11.0-1", 1),
        ("1:0.1-1", "0.12.1+dfsg-1+deb12u1", 1),
        ("0.12.1~rc1-1", "0.12.1-1", -1),
        ("0.12.10-1", "0.12.9-1", 1),
    ])
    func debianVersionsOrderAsDpkgOrdersThem(a: String, b: String, sign: Int) {
        #expect(DebianVersion.compare(a, b).signum() == sign)
        #expect(DebianVersion.compare(b, a).signum() == -sign)
    }

    /// dpkg's versions of the two generations' packages, as `installed` answers them.
    static func packages(_ versions: [String: String]) -> (String) -> String? { { versions[$0] } }

    @Test func aPackagedLibraryIsRefusedOnlyBeforeItsGenerationsFixedRevision() {
        let old = QlogSafety.refusal(
            linkedVersion: "0.12.1", linkedNumber: 0x00_0c_01,
            installed: Self.packages(["libngtcp2-9": "0.12.1+dfsg-1"]))
        #expect(old?.contains("CVE-2026-40170") == true)
        #expect(old?.contains("0.12.1+dfsg-1+deb12u1") == true, "names the revision to upgrade to")
        #expect(
            QlogSafety.refusal(
                linkedVersion: "0.12.1", linkedNumber: 0x00_0c_01,
                installed: Self.packages(["libngtcp2-9": "0.12.1+dfsg-1+deb12u1"])) == nil)
        #expect(
            QlogSafety.refusal(
                linkedVersion: "1.11.0", linkedNumber: 0x01_0b_00,
                installed: Self.packages(["libngtcp2-9": "0.12.1+dfsg-1+deb12u1", "libngtcp2-16": "1.11.0-1+deb13u1"]))
                == nil, "Debian 13's trixie-security build carries the fix")
    }

    @Test func bookwormBackportsOneElevenIsRefused() {
        // Its changelog has no CVE-2026-40170 entry; installed by dpkg, it sorts before Debian 13's fixed revision.
        let installed = QlogSafety.refusal(
            linkedVersion: "1.11.0", linkedNumber: 0x01_0b_00,
            installed: Self.packages(["libngtcp2-16": "1.11.0-1~bpo12+1"]))
        #expect(installed?.contains("1.11.0-1~bpo12+1") == true)
        // Unpacked outside dpkg (as CI does) beside the system's fixed 0.12.1: the fixed package is not the one linked.
        let unpacked = QlogSafety.refusal(
            linkedVersion: "1.11.0", linkedNumber: 0x01_0b_00,
            installed: Self.packages(["libngtcp2-9": "0.12.1+dfsg-1+deb12u1"]))
        #expect(unpacked?.contains("no installed Debian package") == true)
    }

    @Test func upstreamReleasesWithTheFixAndUnpackagedOldOnes() {
        #expect(QlogSafety.refusal(linkedVersion: "1.22.1", linkedNumber: 0x01_16_01, installed: { _ in nil }) == nil)
        #expect(QlogSafety.refusal(linkedVersion: "1.22.0", linkedNumber: 0x01_16_00, installed: { _ in nil }) != nil)
        #expect(QlogSafety.refusal(linkedVersion: "0.12.1", linkedNumber: 0x00_0c_01, installed: { _ in nil }) != nil)
    }

    @Test func theInstalledVersionComesFromTheStatusFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-dpkg-status-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let status = """
            Package: libngtcp2-dev
            Status: install ok installed
            Version: 9.9.9-1

            Package: libngtcp2-9
            Status: install ok installed
            Architecture: amd64
            Version: 0.12.1+dfsg-1

            Package: other
            Status: deinstall ok config-files
            Version: 1.0

            """
        try status.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(DpkgStatus.installedVersion(package: "libngtcp2-9", statusFile: path) == "0.12.1+dfsg-1")
        #expect(DpkgStatus.installedVersion(package: "libngtcp2-9", statusFile: path + ".missing") == nil)
    }
}
