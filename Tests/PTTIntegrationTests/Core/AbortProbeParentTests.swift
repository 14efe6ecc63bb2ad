import ChildProcesses
import Foundation
import TestSupport
import Testing

/// True in the child process this suite starts (TransportCoreTests' `AbortProbes` run only there).
private let inAbortProbeChild = ProcessInfo.processInfo.environment["PTT_ABORT_PROBES"] == "1"

/// Runs `AbortProbes` in a child copy of this test binary and reports how it ended.
@Suite("ngtcp2 0.12.1 abort guards", .integration)
struct AbortProbeParentTests {
    @Test(.enabled(if: !inAbortProbeChild)) func guardsHoldInAChildProcess() throws {
        let process = try SpawnedProgram(
            CommandLine.arguments[0], ["--testing-library", "swift-testing", "--filter", "AbortProbes/"],
            environment: ["PTT_ABORT_PROBES": "1"], errors: .standardOutput)
        let text = String(decoding: process.readToEnd(process.output), as: UTF8.self)
        process.wait(within: 120)
        #expect(!process.signaled, "the probes died by a signal (an ngtcp2 abort?):\n\(text)")
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("4 tests"), "the child did not run the four probes:\n\(text)")
    }
}
