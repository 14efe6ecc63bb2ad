/// The `--workers` supervisor's `/metrics`: the workers' OpenMetrics texts merged into one relay's. A sample present
/// in several workers (same name and labels) is summed, except the relay-wide states: `ptt_relay_ready` and
/// `ptt_relay_anti_replay_store_answered` take the smallest (one worker not ready makes the relay not ready),
/// `ptt_relay_draining` and `ptt_relay_zero_rtt_disabled` the largest, `ptt_relay_build_info` the first. Families
/// keep the first worker's order; lines that are not samples or TYPE/HELP comments are dropped.
enum WorkerMetricsMerge {
    private static let smallest: Set<String> = ["ptt_relay_ready", "ptt_relay_anti_replay_store_answered"]
    private static let largest: Set<String> = ["ptt_relay_draining", "ptt_relay_zero_rtt_disabled"]
    private static let first: Set<String> = ["ptt_relay_build_info"]

    static func merge(_ texts: [String]) -> String {
        var order: [String] = []  // comment lines and sample keys, in first-seen order
        var comments: Set<String> = []
        var values: [String: Double] = [:]
        for text in texts {
            for line in text.split(separator: "\n").map(String.init) where line != "# EOF" {
                if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                    if comments.insert(line).inserted { order.append(line) }
                    continue
                }
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
                else { continue }
                let key = String(line[..<space])
                let name = String(key.prefix { $0 != "{" })
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
        return out + "# EOF\n"
    }
}
