import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// `ptt-transport --version` names the ngtcp2 and GnuTLS the executable runs on, which must be the ones this test
/// process links (the same build: the 0.12.1 build loads the system's libngtcp2.so.9, the 1.11 build its own .so.16).
@Suite("ptt-transport --version", .integration)
struct VersionCLITests {
    @Test func printsTheLinkedLibraryVersions() async throws {
        // A generous timeout: the suite runs in parallel, and CI once took more than 10 s to start this child.
        let result = try await runProgram(Subprocess.cli, ["--version"], timeout: 60)
        #expect(!result.signaled && result.status == 0, "\(result.status): \(result.stderr)")
        #expect(result.stdout.contains("ngtcp2 \(LinkedLibraries.ngtcp2)"), "\(result.stdout)")
        #expect(result.stdout.contains("GnuTLS \(LinkedLibraries.gnutls)"), "\(result.stdout)")
        let ngtcp2 = LinkedLibraries.ngtcp2.split(separator: ".").compactMap { Int($0) }
        #expect(ngtcp2.count == 3 && (ngtcp2[0] == 0 || ngtcp2[0] == 1), "a release of either generation: \(ngtcp2)")
    }
}
