import Foundation
import Testing

@testable import TransportCore

/// The CVE-2026-40170 guard: Debian version ordering and the dpkg status lookup behind it.
@Suite("Linked ngtcp2 version check")
struct LinkedNgtcp2Tests {
    @Test(arguments: [
        ("0.12.1+dfsg-1", "0.12.1+dfsg-1+deb12u1", -1),
        ("0.12.1+dfsg-1+deb12u1", "0.12.1+dfsg-1+deb12u1", 0),
        ("0.12.1+dfsg-1+deb12u2", "0.12.1+dfsg-1+deb12u1", 1),
        ("0.12.0-1", "0.12.1+dfsg-1+deb12u1", -1),
        ("1.4.0-1", "0.12.1+dfsg-1+deb12u1", 1),
        ("1:0.1-1", "0.12.1+dfsg-1+deb12u1", 1),
        ("0.12.1~rc1-1", "0.12.1-1", -1),
        ("0.12.10-1", "0.12.9-1", 1),
    ])
    func debianVersionsOrderAsDpkgOrdersThem(a: String, b: String, sign: Int) {
        #expect(DebianVersion.compare(a, b).signum() == sign)
        #expect(DebianVersion.compare(b, a).signum() == -sign)
    }

    @Test func onlyVersionsBeforeTheFixAreRefused() {
        let refusal = LinkedNgtcp2.refusal(installedVersion: "0.12.1+dfsg-1")
        #expect(refusal?.contains("CVE-2026-40170") == true)
        #expect(LinkedNgtcp2.refusal(installedVersion: LinkedNgtcp2.firstFixedVersion) == nil)
        #expect(LinkedNgtcp2.refusal(installedVersion: "1.4.0-1") == nil)
        #expect(LinkedNgtcp2.refusal(installedVersion: nil) == nil)
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
        #expect(LinkedNgtcp2.installedVersion(statusFile: path) == "0.12.1+dfsg-1")
        #expect(LinkedNgtcp2.installedVersion(statusFile: path + ".missing") == nil)
    }
}
