import Foundation

/// What the live targets share: the relay, the certificates for health checks, and how often to check.
struct LiveContext: Sendable {
    let relay: RelayUnderTest
    let certificates: Certificates
    /// Run a health check (and look for a dead relay) after this many inputs, and once at the end.
    let healthEvery: Int

    /// Checks the relay between inputs: a dead child is a crash (with `lastInput` as the suspect), a failed echo
    /// a health failure. Returns false when the relay is gone and the target must stop.
    func check(_ result: inout TargetResult, lastInput: [UInt8]) async -> Bool {
        if let death = relay.death() {
            result.crashes += 1
            result.findings.append("\(death); last input (\(lastInput.count) bytes): \(Hex.string(lastInput))")
            return false
        }
        if let failure = await HealthCheck.run(relay, certificates: certificates) {
            if let death = relay.death() {
                result.crashes += 1
                result.findings.append("\(death); last input (\(lastInput.count) bytes): \(Hex.string(lastInput))")
                return false
            }
            result.healthFailed += 1
            result.findings.append("health check failed: \(failure); last input: \(Hex.string(lastInput))")
        } else {
            result.healthPassed += 1
        }
        return true
    }
}
