import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

@testable import PTTTransport

/// Issue 31, item 12: the GnuTLS revision is checked at start, as ngtcp2's is for qlog. Before `3.7.9-2+deb12u3`
/// (a segfault on the QUIC early-data path) 0-RTT is refused with the reason and what to install; before
/// `+deb12u5` (CVE-2025-6395) the relay warns; `--version` reports both. This machine runs a fixed revision: dpkg
/// status files written here stand for the old ones.
@Suite("GnuTLS revision checks", .integration)
struct GnuTLSSafetyTests {
    /// A dpkg status file in which `libgnutls30` is installed at `version` (nil: not installed), with neighbours.
    static func statusFile(gnutls version: String?) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-dpkg-status-\(UUID())").path
        let gnutls = version.map { "Package: libgnutls30\nStatus: install ok installed\nVersion: \($0)\n\n" } ?? ""
        let text =
            "Package: libgnutls-dane0\nStatus: install ok installed\nVersion: 3.7.9-2\n\n" + gnutls
            + "Package: libngtcp2-9\nStatus: install ok installed\nVersion: 0.12.1+dfsg-1+deb12u1\n"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func assess(_ revision: String?, linked: String = "3.7.9") throws -> GnuTLSSafety.Assessment {
        let path = try statusFile(gnutls: revision)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return GnuTLSSafety.assess(linkedVersion: linked, statusFile: path)
    }

    @Test(arguments: ["3.7.9-2", "3.7.9-2+deb12u1", "3.7.9-2+deb12u2"])
    func beforeDeb12u3ZeroRTTIsRefusedSayingWhatToInstall(revision: String) throws {
        let assessment = try Self.assess(revision)
        let refusal = try #require(assessment.zeroRTTRefusal)
        #expect(refusal.contains("0-RTT is refused") && refusal.contains("early-data"), "\(refusal)")
        #expect(refusal.contains("libgnutls30 \(revision)"), "names what is installed: \(refusal)")
        #expect(refusal.contains("install libgnutls30 3.7.9-2+deb12u3 or later"), "\(refusal)")
        #expect(assessment.warning?.contains("CVE-2025-6395") == true, "the older revision lacks both fixes")
        #expect(assessment.report.count == 2)
    }

    @Test(arguments: ["3.7.9-2+deb12u3", "3.7.9-2+deb12u4"])
    func beforeDeb12u5TheRelayWarnsOfCVE20256395(revision: String) throws {
        let assessment = try Self.assess(revision)
        #expect(assessment.zeroRTTRefusal == nil)
        let warning = try #require(assessment.warning)
        #expect(warning.contains("CVE-2025-6395") && warning.contains("3.7.9-2+deb12u5 or later"), "\(warning)")
        #expect(assessment.report.first?.contains("0-RTT allowed") == true, "\(assessment.report)")
    }

    @Test(arguments: ["3.7.9-2+deb12u5", "3.7.9-2+deb12u6", "3.7.9-2+deb12u7"])
    func fixedRevisionsPassBothChecks(revision: String) throws {
        let assessment = try Self.assess(revision)
        #expect(assessment.zeroRTTRefusal == nil && assessment.warning == nil)
        #expect(
            assessment.report == [
                "GnuTLS 3.7.9 (libgnutls30 \(revision)): the early-data segfault is fixed: 0-RTT allowed",
                "GnuTLS 3.7.9 (libgnutls30 \(revision)): CVE-2025-6395 is fixed",
            ])
    }

    /// A 3.7.9 that dpkg did not install cannot be shown to carry Debian's backport; other versions are judged by
    /// their upstream release (3.7.11 and 3.8.4 fix the segfault, 3.8.10 the CVE).
    @Test func withoutTheLinkedPackageTheUpstreamVersionDecides() throws {
        #expect(try Self.assess(nil).zeroRTTRefusal?.contains("the package this library must come from") == true)
        #expect(try Self.assess("3.8.9-3", linked: "3.7.9").zeroRTTRefusal != nil, "another version's package")
        #expect(try Self.assess(nil, linked: "3.8.3").zeroRTTRefusal?.contains("GnuTLS 3.8.4 or later") == true)
        let eightNine = try Self.assess(nil, linked: "3.8.9")
        #expect(eightNine.zeroRTTRefusal == nil && eightNine.warning?.contains("GnuTLS 3.8.10") == true)
        let sevenEleven = try Self.assess(nil, linked: "3.7.11")
        #expect(sevenEleven.zeroRTTRefusal == nil && sevenEleven.warning != nil)
        let current = try Self.assess(nil, linked: "3.8.10")
        #expect(current.zeroRTTRefusal == nil && current.warning == nil)
    }

    @Test func aStatusFileOfGarbageCountsAsNothingInstalled() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-dpkg-garbage-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var bytes = (0..<20_000).map { _ in UInt8.random(in: 0...255) }
        bytes += Array("\nPackage: libgnutls30\nVersion: 3.7.9-2+deb12u7\n".utf8)  // never "installed"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let assessment = GnuTLSSafety.assess(linkedVersion: "3.7.9", statusFile: path)
        #expect(assessment.zeroRTTRefusal != nil, "fail closed: no installed package carries the fix")
        #expect(GnuTLSSafety.assess(linkedVersion: "3.7.9", statusFile: path + ".missing").zeroRTTRefusal != nil)
    }

    /// A relay bound on an old revision serves resumption without 0-RTT and says why; on this machine's it accepts.
    @Test func aServerOnAnOldRevisionRefusesZeroRTTAndSaysWhy() async throws {
        let old = try Self.statusFile(gnutls: "3.7.9-2+deb12u2")
        defer { try? FileManager.default.removeItem(atPath: old) }
        for statusFile in [old, DpkgStatus.defaultFile] {
            var configuration = Fixtures.serverConfiguration()
            configuration.dpkgStatusFile = statusFile
            let server = try await TransportServer.bind(configuration: configuration)
            let relay = Task { await EchoRelay.run(server) }
            let address = try #require(server.quicAddress)
            let client = TCPFallbackTests.client(.quicOnly)
            let ticket = try await ZeroRTTBudgetTests.ticket(client, address)
            let outcome = try await ZeroRTTBudgetTests.wake(client, address, ticket)
            if statusFile == old {
                #expect(server.zeroRTTRefusal?.contains("install libgnutls30 3.7.9-2+deb12u3") == true)
                #expect(outcome == .resumed(earlyData: .rejected), "resumed, in 1-RTT")
            } else {
                #expect(server.zeroRTTRefusal == LinkedLibraries.zeroRTTRefusal)
                #expect(LinkedLibraries.zeroRTTRefusal != nil || outcome == .resumed(earlyData: .accepted))
            }
            relay.cancel()
            await server.shutdown()
        }
    }

    @Test func versionReportsBothChecks() async throws {
        let result = try await runProgram(Subprocess.cli, ["--version"], timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        for check in LinkedLibraries.checks {
            #expect(result.stdout.contains(check), "\(result.stdout)")
        }
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.contains { $0.contains("early-data segfault") || $0.contains("0-RTT is refused") })
        #expect(lines.contains { $0.contains("CVE-2025-6395") })
        #expect(lines.contains { $0.contains("qlog") })
    }
}
