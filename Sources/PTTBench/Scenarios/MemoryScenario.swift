import ChildProcesses
import Foundation
import PTTTransport

/// capacity-memory: resident memory per idle connection at N = 1,000 and 10,000. The relay runs as a child
/// process (this CLI's `serve`), so each side is measured on its own: the child's VmRSS growth / N for the relay,
/// this process's for the client. Where the CLI cannot spawn itself (inside a test process) relay and client
/// share this process and only the pair figure exists.
enum MemoryScenario {
    static let counts = [1_000, 10_000]
    /// Quick runs (`--iterations` below 10, e.g. the smoke test) measure fewer connections: real figures, noisier.
    static let quickCounts = [50, 200]

    static func counts(_ options: BenchOptions) -> [Int] { options.iterations < 10 ? quickCounts : counts }

    static func run(_ result: inout ScenarioResult, options: BenchOptions, environment: BenchEnvironment) async throws {
        CapacityScenarios.raiseFileLimit(to: 30_000)
        if let executable = options.relayExecutable {
            try await perSide(&result, executable: executable, options: options, environment: environment)
        } else {
            try await inProcess(&result, options: options, environment: environment)
        }
    }

    /// Relay in a child `serve`, clients here. Before measuring, one connection is made and closed on each side so
    /// one-time set-up (TLS contexts, first allocations) is not charged to the connections.
    private static func perSide(
        _ result: inout ScenarioResult, executable: String, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws {
        for count in counts(options) {
            let (command, arguments) = environment.serverSideCommand(
                executable,
                [
                    "serve", "--listen", "\(environment.serverHost):0", "--cert", options.certificate,
                    "--key", options.privateKey, "--idle-timeout", "300", "--max-connections", "\(count + 10)",
                    "--retry-above", "off", "--no-source-limits",
                ])  // one host plays every phone here
            let relay = try await ChildServer.start(command, arguments)
            guard let address = ServerAddress(relay.address) else {
                await relay.stop()
                throw BenchError("the child relay printed an unusable address \(relay.address)")
            }
            let client = CapacityScenarios.client(options, environment)
            var connections: [TransportConnection] = []
            do {
                await (try await client.connect(to: address)).close()
                try await Task.sleep(for: .milliseconds(200))
                let relayBefore = relay.residentKiB()
                let clientBefore = ResidentMemory.kib(ofProcess: "self")
                connections.reserveCapacity(count)
                for index in 0..<count {
                    connections.append(try await client.connect(to: address))
                    if index % 500 == 499 { options.progress("capacity-memory: \(index + 1)/\(count)") }
                }
                try await Task.sleep(for: .milliseconds(500))
                let relayAfter = relay.residentKiB()
                let clientAfter = ResidentMemory.kib(ofProcess: "self")
                if let relayBefore, let relayAfter {
                    result.figure(
                        "relay_kib_per_idle_connection_at_\(count)",
                        Double(relayAfter - relayBefore) / Double(count))
                }
                if let clientBefore, let clientAfter {
                    result.figure(
                        "client_kib_per_idle_connection_at_\(count)",
                        Double(clientAfter - clientBefore) / Double(count))
                }
            } catch {
                result.note = "stopped at \(connections.count) of \(count) connections: \(error)"
            }
            for connection in connections { await connection.close() }
            connections.removeAll()
            await relay.stop()
            if result.note != nil { return }
        }
        result.note =
            "relay: VmRSS growth of a child `serve` (echo relay) / N; client: this process's / N; "
            + "after one warm-up connection per side; N idle QUIC connections, 500 ms after the last connect"
    }

    /// Relay and clients in this process: RSS growth / N covers both ends of each connection.
    private static func inProcess(
        _ result: inout ScenarioResult, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws {
        for count in counts(options) {
            var configuration = ServerConfiguration(
                quic: nil, certificateChain: options.certificate,
                privateKey: options.privateKey)
            configuration.maxStreamsPerConnection = 4
            configuration.maxConnections = count + 10
            configuration.idleTimeout = .seconds(300)
            let (server, address, relay) = try await environment.startRelay(configuration)
            let client = CapacityScenarios.client(options, environment)
            let before = ResidentMemory.kib(ofProcess: "self") ?? 0
            var connections: [TransportConnection] = []
            connections.reserveCapacity(count)
            do {
                for index in 0..<count {
                    connections.append(try await client.connect(to: address))
                    if index % 500 == 499 { options.progress("capacity-memory: \(index + 1)/\(count)") }
                }
                try await Task.sleep(for: .milliseconds(500))
                let after = ResidentMemory.kib(ofProcess: "self") ?? 0
                result.figure("kib_per_idle_connection_pair_at_\(count)", Double(after - before) / Double(count))
            } catch {
                result.note = "stopped at \(connections.count) connections: \(error)"
            }
            for connection in connections { await connection.close() }
            connections.removeAll()
            relay.cancel()
            await server.shutdown()
            if result.note != nil { return }
        }
        result.note =
            "in-process fallback (no CLI executable to run the relay as a child, e.g. inside a test "
            + "process): relay and client share the process, so a figure covers both ends of one connection"
    }
}
