import Foundation
import PTTTransport

/// Renders results as the JSON contract of the benchmark issue or as a table for people.
public struct BenchReport: Sendable {
    public var machine: String
    /// The linked ngtcp2 and GnuTLS, as `LinkedLibraries.summary` names them: figures differ between generations.
    public var libraries: String
    public var rttMilliseconds: Double?
    public var results: [ScenarioResult]

    public init(
        machine: String, libraries: String = LinkedLibraries.summary, rttMilliseconds: Double?,
        results: [ScenarioResult]
    ) {
        self.machine = machine
        self.libraries = libraries
        self.rttMilliseconds = rttMilliseconds
        self.results = results
    }

    /// `{"machine": ..., "libraries": ..., "rtt_ms": ..., "scenarios": [...]}`.
    public func jsonObject() -> [String: Any] {
        var scenarios: [[String: Any]] = []
        for result in results {
            var entry: [String: Any] = [
                "scenario": result.scenario, "iterations": result.iterations,
                "peer": result.peer,
            ]
            func put(_ key: String, _ value: Double?) { if let value { entry[key] = Self.round(value) } }
            if !result.handshake.isEmpty || !result.firstResponse.isEmpty {
                put("handshake_p50_ms", result.handshake.p50)
                put("first_response_p50_ms", result.firstResponse.p50)
                put("first_response_p90_ms", result.firstResponse.p90)
                put("first_response_p99_ms", result.firstResponse.p99)
                put("first_datagram_p50_ms", result.firstDatagram.p50)
                if let rtt = rttMilliseconds, rtt > 0 {
                    put("handshake_p50_rtt", result.handshake.p50.map { $0 / rtt })
                    put("first_response_p50_rtt", result.firstResponse.p50.map { $0 / rtt })
                    put("first_datagram_p50_rtt", result.firstDatagram.p50.map { $0 / rtt })
                }
                put("ptt_over_peer_first_response_p50", PeerComparison.firstResponseRatio(of: result, in: results))
            }
            for (name, value) in result.figures {
                entry[name] = Self.round(value)
                put("ptt_over_peer_\(name)", PeerComparison.figureRatio(name, of: result, in: results))
            }
            if let note = result.note { entry["note"] = note }
            scenarios.append(entry)
        }
        var object: [String: Any] = ["machine": machine, "libraries": libraries, "scenarios": scenarios]
        object["rtt_ms"] = rttMilliseconds ?? NSNull()
        return object
    }

    public func json() -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: jsonObject(), options: [.sortedKeys]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// A Markdown table (setup latency) followed by capacity figures.
    public func table() -> String {
        var lines: [String] = []
        let rtt = rttMilliseconds.map { "\(Self.format($0)) ms emulated RTT" } ?? "loopback"
        lines.append("ptt-lab bench — \(machine), \(libraries), \(rtt)")
        lines.append("")
        lines.append(
            "| scenario | peer | n | handshake p50 ms | first response p50 / p90 / p99 ms | p50 in RTT | "
                + "first datagram p50 ms | ptt / peer first response p50 |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for result in results where !result.handshake.isEmpty || (result.note != nil && result.figures.isEmpty) {
            if result.handshake.isEmpty {
                lines.append("| \(result.scenario) | \(result.peer) | – | – | \(result.note ?? "") | – | – | – |")
                continue
            }
            let inRTT = rttMilliseconds.flatMap { rtt in result.firstResponse.p50.map { Self.format($0 / rtt) } } ?? "–"
            let ratio = PeerComparison.firstResponseRatio(of: result, in: results)
            lines.append(
                "| \(result.scenario) | \(result.peer) | \(result.firstResponse.count) | "
                    + "\(Self.format(result.handshake.p50)) | \(Self.format(result.firstResponse.p50)) / "
                    + "\(Self.format(result.firstResponse.p90)) / \(Self.format(result.firstResponse.p99)) | \(inRTT) | "
                    + "\(Self.format(result.firstDatagram.p50)) | \(Self.format(ratio)) |")
        }
        let capacity = results.filter { !$0.figures.isEmpty }
        if !capacity.isEmpty {
            lines.append("")
            lines.append("| capacity scenario | peer | figure | value | ptt / peer |")
            lines.append("|---|---|---|---|---|")
            for result in capacity {
                for (name, value) in result.figures {
                    let ratio = PeerComparison.figureRatio(name, of: result, in: results)
                    lines.append(
                        "| \(result.scenario) | \(result.peer) | \(name) | \(Self.format(value)) | "
                            + "\(Self.format(ratio)) |")
                }
                if let note = result.note { lines.append("| \(result.scenario) | \(result.peer) | note | \(note) | |") }
            }
        }
        return lines.joined(separator: "\n")
    }

    static func round(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    static func format(_ value: Double?) -> String {
        guard let value else { return "–" }
        if value >= 1000 { return String(Int(value.rounded())) }
        return String(format: value >= 10 ? "%.1f" : "%.2f", value)
    }
}
