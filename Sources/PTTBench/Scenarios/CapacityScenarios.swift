import Foundation
import PTTTransport

/// Relay capacity on loopback: datagram rates, fan-out, handshake rate, memory per idle connection.
enum CapacityScenarios {
    static func run(_ name: String, options: BenchOptions, environment: BenchEnvironment) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: 1)
        result.note = "not implemented in this build yet"
        return result
    }
}
