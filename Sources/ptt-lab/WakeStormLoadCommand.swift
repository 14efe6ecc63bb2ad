import CommandLineSupport
import PTTBench

/// `ptt-lab wake-storm-load` (hidden, not in the usage): the load generator `bench --scenario wake-storm`
/// runs as a child process, so it has a core of its own. See `WakeStormLoad`.
enum WakeStormLoadCommand {
    static func run(_ raw: [String]) async throws {
        let args = try Arguments(raw, options: ["relay", "ca", "clients", "loops"], flags: [])
        let clients = try args.integer("clients", default: 100)
        let loops = try args.integer("loops", default: 1)
        guard clients > 0 else { throw Arguments.Failure(description: "--clients must be at least 1") }
        guard loops > 0 else { throw Arguments.Failure(description: "--loops must be at least 1") }
        try await WakeStormLoad.run(
            relay: try args.required("relay"), ca: try args.required("ca"), clients: clients, loops: loops)
    }
}
