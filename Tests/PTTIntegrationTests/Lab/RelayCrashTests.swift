import Foundation
import TestSupport
import Testing

@testable import PTTFuzz

/// A child relay that dies by a signal is counted as one crash, with the signal and the last input in the
/// finding, and the targets after it do not count it again.
@Suite(.integration) struct RelayCrashTests {
    @Test(.enabled(if: ShortRunTests.executable != nil, "needs the ptt-transport executable built next to the tests"))
    func aRelayKilledByASignalIsOneCrash() async throws {
        let certificates = Certificates(directory: ShortRunTests.certs)
        let scratch = try Scratch.make(certificates: certificates)
        defer { try? FileManager.default.removeItem(atPath: scratch.directory) }
        let relay = try await RelayUnderTest.start(
            executable: ShortRunTests.executable, certificates: certificates,
            scratch: scratch.directory)
        let pid = try #require(relay.processIdentifier)
        kill(pid, SIGKILL)  // SIGSEGV sent from outside is survived: the backtracer returns, no fault repeats
        for _ in 0..<500 where !relay.isDead { try await Task.sleep(for: .milliseconds(10)) }
        #expect(relay.isDead)

        let context = LiveContext(relay: relay, certificates: certificates, healthEvery: 5)
        var random = FuzzRandom(seed: 1)
        let first = await RelayUDPTarget.run(count: 10, seeds: [], context: context, random: &random)
        let second = await RelayTCPTarget.run(count: 10, seeds: [], context: context, random: &random)
        #expect(first.crashes + second.crashes == 1)
        #expect((first.findings + second.findings).contains { $0.contains("killed by signal \(SIGKILL)") })
        #expect(second.findings.contains { $0.hasPrefix("skipped") })
        await relay.stop()
    }
}
