/// The `--workers` supervisor's `/metrics`: the workers' OpenMetrics texts merged into one relay's. A sample present
/// in several workers (same name and labels) is summed, except the relay-wide states: `ptt_relay_ready` and
/// `ptt_relay_anti_replay_store_answered` take the smallest (one worker not ready makes the relay not ready),
/// `ptt_relay_draining` and `ptt_relay_zero_rtt_disabled` the largest, `ptt_relay_build_info` the first. Families
/// keep the first worker's order; lines that are not samples or TYPE/HELP comments are dropped.
///
/// An upgrade's old generation, still draining, comes `alongside`: its samples are summed in as well (its handshakes,
/// datagrams and connections stay in the host's figures until it exits), except the relay-wide states — the host is
/// ready and not draining while its serving generation is — and `ptt_relay_workers_alongside` says how many such
/// workers answered.
enum WorkerMetricsMerge {
    private static let smallest: Set<String> = ["ptt_relay_ready", "ptt_relay_anti_replay_store_answered"]
    private static let largest: Set<String> = ["ptt_relay_draining", "ptt_relay_zero_rtt_disabled"]
    private static let first: Set<String> = ["ptt_relay_build_info"]

    static let alongsideFamily = "ptt_relay_workers_alongside"

    static func merge(_ texts: [String], alongside: [String] = []) -> String {
        var order: [String] = []  // comment lines and sample keys, in first-seen order
        var comments: Set<String> = []
        var values: [String: Double] = [:]
        let states = smallest.union(largest).union(first)
        for (position, text) in (texts + alongside).enumerated() {
            let serving = position < texts.count
            for line in text.split(separator: "\n").map(String.init) where line != "# EOF" {
                if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                    if comments.insert(line).inserted { order.append(line) }
                    continue
                }
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
                else { continue }
                let key = String(line[..<space])
                let name = String(key.prefix { $0 != "{" })
                if !serving && states.contains(name) { continue }
                guard let old = values[key] else {
                    values[key] = value
                    order.append(key)
                    continue
                }
                values[key] =
                    smallest.contains(name)
                    ? min(old, value)
                    : largest.contains(name) ? max(old, value) : first.contains(name) ? old : old + value
            }
        }
        var out = ""
        for entry in order {
            if let value = values[entry] {
                out +=
                    "\(entry) \(value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value))\n"
            } else {
                out += entry + "\n"
            }
        }
        out += "# TYPE \(alongsideFamily) gauge\n"
        out += "# HELP \(alongsideFamily) workers of a generation still draining after an upgrade, counted in\n"
        out += "\(alongsideFamily) \(alongside.count)\n"
        return out + "# EOF\n"
    }
}
