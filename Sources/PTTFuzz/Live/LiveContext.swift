import ChildProcesses
import Foundation

/// What the live targets share: the relay, the certificates for health checks, and how often to check.
struct LiveContext: Sendable {
    let relay: RelayUnderTest
    let certificates: Certificates
    /// Run a health check (and look for a dead relay) after this many inputs, and once at the end.
    let healthEvery: Int

    /// nil when the relay is up; otherwise the result of `name`, which does not run: the death counted as a
    /// crash if nobody reported it yet (it died after the previous target's last check), else a note.
    func skippedBecauseDead(_ name: String) -> TargetResult? {
        guard relay.isDead else { return nil }
        var result = TargetResult(name: name)
        if let death = relay.death() {
            result.crashes += 1
            result.findings.append("\(death) (between targets)")
        } else {
            result.findings.append("skipped: the relay had died during an earlier target")
        }
        return result
    }

    /// The process's and the child relay's CPU seconds now, for `cpuSeconds(since:)`.
    func cpuMark() -> (Double, Double) { (CPUTime.process(), relay.childCPUSeconds) }

    /// CPU seconds this process and the child relay used since `mark`.
    func cpuSeconds(since mark: (Double, Double)) -> Double {
        max(0, CPUTime.process() - mark.0) + max(0, relay.childCPUSeconds - mark.1)
    }

    /// Checks the relay between inputs: a dead child is a crash (with `lastInput` as the suspect), a failed echo
    /// a health failure. Returns false when the relay is gone and the target must stop.
    func check(_ result: inout TargetResult, lastInput: [UInt8]) async -> Bool {
        guard !relay.isDead else {
            recordDeath(&result, lastInput: lastInput)
            return false
        }
        if let failure = await HealthCheck.run(relay, certificates: certificates) {
            guard !relay.isDead else {
                recordDeath(&result, lastInput: lastInput)
                return false
            }
            result.healthFailed += 1
            result.findings.append("health check failed: \(failure); last input: \(Hex.string(lastInput))")
        } else {
            result.healthPassed += 1
        }
        return true
    }

    private func recordDeath(_ result: inout TargetResult, lastInput: [UInt8]) {
        guard let death = relay.death() else { return }
        result.crashes += 1
        result.findings.append("\(death); last input (\(lastInput.count) bytes): \(Hex.string(lastInput))")
    }
}
