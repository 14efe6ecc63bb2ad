import ChildProcesses
import Foundation
import PTTTransport

/// The fleet `group-across-relays` measures: a `redis-server` of its own and three `ptt-transport serve` children
/// started with the options (`--talk-groups --fleet --anti-replay --ticket-key --reset-secret`, no trunk
/// option: trunks on each relay's port), each named by the address it listens on.
final class FleetOfRelays: Sendable {
    static let redisServer = "/usr/bin/redis-server"
    static let redisCLI = "/usr/bin/redis-cli"

    let redisPort: UInt16
    let relays: [ChildServer]
    private let redis: SpawnedProgram
    private let directory: URL

    private init(redisPort: UInt16, redis: SpawnedProgram, relays: [ChildServer], directory: URL) {
        self.redisPort = redisPort
        self.redis = redis
        self.relays = relays
        self.directory = directory
    }

    /// The relays' fleet names (the addresses they listen on).
    var names: [String] { relays.map(\.address) }

    /// Starts Redis (on a free loopback port) and three relays of `executable` (`--relay-loops N`: each with N
    /// event loops; by default one per CPU).
    static func start(executable: String, options: BenchOptions) async throws -> FleetOfRelays {
        guard FileManager.default.isExecutableFile(atPath: redisServer) else {
            throw BenchError("needs \(redisServer) (Debian's redis-server)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-bench-fleet-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (port, redis) = try await StablePort.first(attempts: 20) { port in
            let program = try SpawnedProgram(
                redisServer,
                [
                    "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                    directory.path,
                ], output: .discard, errors: .discard)
            for _ in 0..<100 {
                if (try? await runProgram(redisCLI, ["-p", "\(port)", "ping"], timeout: 5))?.stdout.hasPrefix("PONG")
                    == true
                {
                    return (port, program)
                }
                guard program.isRunning else { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            program.terminate(within: 2)
            throw BenchError("redis-server did not answer on port \(port)")
        }
        var relays: [ChildServer] = []
        do {
            for _ in 0..<3 {
                relays.append(
                    try await ChildServer.start(
                        executable,
                        [
                            "serve", "--listen", "127.0.0.1:0", "--cert", options.certificate, "--key",
                            options.privateKey, "--talk-groups", "--fleet", "redis://127.0.0.1:\(port)",
                            "--anti-replay", "redis://127.0.0.1:\(port)", "--ticket-key",
                            directory.appendingPathComponent("ticket.key").path, "--reset-secret",
                            directory.appendingPathComponent("reset.secret").path,
                        ] + (options.relayLoops.map { ["--event-loops", "\($0)"] } ?? [])))
            }
        } catch {
            for relay in relays { relay.stopNow() }
            redis.terminate(within: 2)
            throw error
        }
        return FleetOfRelays(redisPort: port, redis: redis, relays: relays, directory: directory)
    }

    /// The commands Redis processed so far (`INFO stats` total_commands_processed); nil when it does not answer.
    func storeCommands() async -> Double? {
        guard let info = try? await runProgram(Self.redisCLI, ["-p", "\(redisPort)", "info", "stats"], timeout: 5)
        else { return nil }
        let line = info.stdout.split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_commands_processed:") }
        return line.flatMap { Double($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
    }

    func stop() {
        for relay in relays where relay.isRunning { relay.stopNow() }
        redis.terminate(within: 2)
        try? FileManager.default.removeItem(at: directory)
    }
}
