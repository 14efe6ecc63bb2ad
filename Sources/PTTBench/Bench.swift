import Foundation
import TransportIO

/// Runs the selected scenarios and returns the report. Never asserts: a scenario that cannot run says why.
public enum Bench {
    public static func run(_ options: BenchOptions) async throws -> BenchReport {
        var options = options
        let environment: BenchEnvironment
        if options.rttMilliseconds != nil || options.loss > 0 {
            if let reason = EmulatedNetwork.availability() {
                options.progress("no emulated path: \(reason); running on loopback only\n")
                options.rttMilliseconds = nil
                options.loss = 0
                environment = try BenchEnvironment.loopback()
            } else {
                environment = try BenchEnvironment.emulated(rttMilliseconds: options.rttMilliseconds ?? 0,
                                                            loss: options.loss)
            }
        } else {
            environment = try BenchEnvironment.loopback()
        }
        defer { environment.shutdown() }
        var results: [ScenarioResult] = []
        for name in BenchScenario.all where options.wants(name) {
            options.progress("running \(name)")
            if BenchScenario.setup.contains(name) {
                results.append(try await SetupScenarios.run(name, options: options, environment: environment))
            } else {
                results.append(try await CapacityScenarios.run(name, options: options, environment: environment))
            }
        }
        for name in options.scenarios where !BenchScenario.all.contains(name) {
            throw BenchError("unknown scenario \(name); known: \(BenchScenario.all.joined(separator: ", "))")
        }
        return BenchReport(machine: machineDescription(), rttMilliseconds: environment.rttMilliseconds,
                           results: results)
    }

    /// CPU model and count, for the report header.
    static func machineDescription() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
            ?? "unknown CPU"
        return "\(ProcessInfo.processInfo.activeProcessorCount) × \(model)"
    }
}
