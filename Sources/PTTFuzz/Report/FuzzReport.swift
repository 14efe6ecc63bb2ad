import Foundation

/// The outcome of a whole `ptt-lab fuzz` run: one row per target plus totals.
public struct FuzzReport: Sendable {
    /// The seed every input derives from.
    public var seed: UInt64
    /// The requested total budget.
    public var iterations: Int
    /// Per-target results, in run order.
    public var targets: [TargetResult] = []
    /// Wall-clock seconds for the whole run (setup and capture included).
    public var wallSeconds = 0.0
    /// Notes on the run (how the relay ran, what was captured, skipped targets).
    public var notes: [String] = []

    /// Inputs fed, all targets.
    public var totalInputs: Int { targets.reduce(0) { $0 + $1.inputs } }
    /// Crashes, all targets.
    public var totalCrashes: Int { targets.reduce(0) { $0 + $1.crashes } }
    /// Failed health checks, all targets.
    public var totalHealthFailures: Int { targets.reduce(0) { $0 + $1.healthFailed } }
    /// CPU seconds, all targets.
    public var totalCPUSeconds: Double { targets.reduce(0) { $0 + $1.cpuSeconds } }
    /// No crash, no failed health check, and no finding (an input that could not even be delivered counts: a
    /// run that stopped reaching the code under test proves nothing about it).
    public var isClean: Bool {
        totalCrashes == 0 && totalHealthFailures == 0 && targets.allSatisfy { $0.findings.isEmpty }
    }

    /// A fixed-width table for a terminal.
    public func table() -> String {
        var lines = ["seed \(seed), budget \(iterations) inputs"]
        lines.append(
            pad("target", 26) + pad("inputs", 10, right: true) + pad("rejected", 10, right: true)
                + pad("accepted", 10, right: true) + pad("crashes", 9, right: true) + pad("health", 9, right: true)
                + pad("wall s", 9, right: true) + pad("cpu s", 9, right: true))
        for target in targets {
            let health =
                target.healthPassed + target.healthFailed == 0
                ? "-"
                : "\(target.healthPassed)/\(target.healthPassed + target.healthFailed)"
            lines.append(
                pad(target.name, 26) + pad("\(target.inputs)", 10, right: true)
                    + pad("\(target.rejected)", 10, right: true) + pad("\(target.accepted)", 10, right: true)
                    + pad("\(target.crashes)", 9, right: true) + pad(health, 9, right: true)
                    + pad(fixed(target.wallSeconds), 9, right: true) + pad(fixed(target.cpuSeconds), 9, right: true))
        }
        lines.append(
            pad("total", 26) + pad("\(totalInputs)", 10, right: true) + pad("", 20)
                + pad("", 10) + pad("\(totalCrashes)", 9, right: true) + pad("", 9)
                + pad(fixed(wallSeconds), 9, right: true) + pad(fixed(totalCPUSeconds), 9, right: true))
        lines += notes.map { "note: \($0)" }
        lines += targets.flatMap { target in target.findings.map { "finding [\(target.name)]: \($0)" } }
        return lines.joined(separator: "\n")
    }

    /// The same figures as one JSON object.
    public func json() -> String {
        let rows: [[String: Any]] = targets.map { target in
            [
                "target": target.name, "inputs": target.inputs, "rejected": target.rejected,
                "accepted": target.accepted, "crashes": target.crashes, "health_passed": target.healthPassed,
                "health_failed": target.healthFailed, "wall_seconds": rounded(target.wallSeconds),
                "cpu_seconds": rounded(target.cpuSeconds), "findings": target.findings,
            ]
        }
        let object: [String: Any] = [
            "seed": seed, "iterations": iterations, "total_inputs": totalInputs, "total_crashes": totalCrashes,
            "health_failures": totalHealthFailures, "wall_seconds": rounded(wallSeconds),
            "cpu_seconds": rounded(totalCPUSeconds), "targets": rows, "notes": notes,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let space = String(repeating: " ", count: max(0, width - text.count))
        return right ? space + text : text + space
    }

    private func fixed(_ value: Double) -> String { String(format: "%.2f", value) }
    private func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}
