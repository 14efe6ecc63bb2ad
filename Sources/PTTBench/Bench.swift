import Foundation
import NetworkEmulation
import TransportIO

/// Runs the selected scenarios and returns the report. Never asserts: a scenario that cannot run says why.
public enum Bench {
    public static func run(_ options: BenchOptions) async throws -> BenchReport {
        var options = options
        UDPSendBatch.defaultMaxPackets.withLock { $0 = max(1, min(1_024, options.udpSendBatch)) }
        let environment: BenchEnvironment
        if options.rttMilliseconds != nil || options.loss > 0 {
            if let reason = EmulatedNetwork.availability() {
                options.progress("no emulated path: \(reason); running on loopback only\n")
                options.rttMilliseconds = nil
                options.loss = 0
                environment = try BenchEnvironment.loopback()
            } else {
                environment = try BenchEnvironment.emulated(
                    rttMilliseconds: options.rttMilliseconds ?? 0,
                    loss: options.loss, tcpFastOpen: options.tcpFastOpen)
            }
        } else {
            environment = try BenchEnvironment.loopback()
        }
        defer { environment.shutdown() }
        var results: [ScenarioResult] = []
        var aioquic: Result<AioquicPeer, BenchError>?
        for name in BenchScenario.all where options.wants(name) {
            options.progress("running \(name)")
            if name == "handover-rebind" {
                results.append(try await RebindScenario.run(name, options: options, environment: environment))
            } else if BenchScenario.drain.contains(name) {
                results.append(try await RollingRestartScenario.run(name, options: options, environment: environment))
            } else if BenchScenario.upgrade.contains(name) {
                results.append(try await InPlaceUpgradeScenario.run(name, options: options, environment: environment))
            } else if name == "handover-migrate" {
                results.append(try await MigrateScenario.run(options: options, environment: environment))
            } else if BenchScenario.loss.contains(name) {
                results.append(try await LossScenarios.run(name, options: options, environment: environment))
            } else if BenchScenario.wake.contains(name) {
                results.append(
                    contentsOf: try await WakeToVoiceScenario.run(options: options, environment: environment))
            } else if BenchScenario.floor.contains(name) {
                results.append(
                    contentsOf: try await FloorAccessScenario.run(options: options, environment: environment))
            } else if BenchScenario.fleet.contains(name) {
                results.append(
                    contentsOf: try await GroupAcrossRelaysScenario.run(options: options, environment: environment))
            } else if BenchScenario.balancer.contains(name) {
                results.append(
                    contentsOf: try await BalancerDrainScenario.run(options: options, environment: environment))
            } else if BenchScenario.crash.contains(name) {
                results.append(
                    contentsOf: try await CrashRecoveryScenario.run(options: options, environment: environment))
            } else if BenchScenario.link.contains(name) {
                results.append(contentsOf: try await ReconnectScenario.run(options: options, environment: environment))
            } else if BenchScenario.setup.contains(name) {
                results.append(try await SetupScenarios.run(name, options: options, environment: environment))
            } else {
                results.append(try await CapacityScenarios.run(name, options: options, environment: environment))
            }
            guard AioquicPeer.scenarios.contains(name) else { continue }
            if aioquic == nil {
                aioquic = await AioquicPeer.locate(packageRoot: options.packageRoot)
                if case .failure(let reason) = aioquic {
                    var row = ScenarioResult(scenario: "aioquic side by side", iterations: 0)
                    row.peer = "aioquic"
                    row.note = "not run: \(reason)"
                    results.append(row)
                }
            }
            guard case .success(let peer) = aioquic else { continue }
            options.progress("running \(name) against aioquic")
            do {
                results.append(
                    try await AioquicScenarios.run(
                        name, peer: peer, options: options,
                        environment: environment))
            } catch {
                var row = ScenarioResult(scenario: name, iterations: 0)
                row.peer = "aioquic"
                row.note = "could not run against aioquic: \(error)"
                results.append(row)
            }
        }
        for name in options.scenarios where !BenchScenario.all.contains(name) {
            throw BenchError("unknown scenario \(name); known: \(BenchScenario.all.joined(separator: ", "))")
        }
        return BenchReport(
            machine: machineDescription(), rttMilliseconds: environment.rttMilliseconds,
            results: results)
    }

    /// CPU model and count, for the report header.
    static func machineDescription() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
            ?? "unknown CPU"
        return "\(ProcessInfo.processInfo.activeProcessorCount) × \(model)"
    }
}
