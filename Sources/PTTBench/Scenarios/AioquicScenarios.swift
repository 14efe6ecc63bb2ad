import ChildProcesses
import Foundation
import PTTTransport

/// The side-by-side runs: `quic-full`, `quic-resumed`, `quic-0rtt` and `capacity-datagrams` with our client against
/// the aioquic echo server (a child process) instead of our relay. Rows carry `peer: "aioquic"`.
enum AioquicScenarios {
    static func run(
        _ name: String, peer: AioquicPeer, options: BenchOptions, environment: BenchEnvironment
    )
        async throws -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: name.hasPrefix("capacity") ? 1 : options.iterations)
        result.peer = "aioquic"
        let counting = name == "capacity-datagrams"
        let server = try await peer.start(options, environment, countDatagrams: counting)
        do {
            guard let address = ServerAddress(server.address) else {
                throw BenchError("the aioquic server printed an unusable address \(server.address)")
            }
            switch name {
            case "quic-full": try await measure(&result, address, options, environment, resume: false)
            case "quic-resumed":
                try await measure(
                    &result, address, options, environment, resume: true,
                    replaySafe: false)
            case "quic-0rtt": try await measure(&result, address, options, environment, resume: true)
            case "capacity-datagrams":
                try await datagrams(&result, address, server, options, environment)
                return result
            default: result.note = "not compared with aioquic"
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
        return result
    }

    /// Like `SetupScenarios.measure`: each connection resumes from the state the previous one saved (aioquic's
    /// tickets are single use, so each connection waits for a fresh one).
    private static func measure(
        _ result: inout ScenarioResult, _ address: ServerAddress, _ options: BenchOptions,
        _ environment: BenchEnvironment, resume: Bool, replaySafe: Bool = true
    ) async throws {
        let client = SetupScenarios.client(options, environment)
        var saved: ResumptionState?
        if resume { saved = try await SetupScenarios.once(client, address, resuming: nil).state }
        for index in 0..<options.iterations {
            let measured = try await SetupScenarios.once(
                client, address, resuming: resume ? saved : nil,
                replaySafe: replaySafe)
            result.record(measured)
            if resume { saved = measured.state ?? saved }
            options.progress("\(result.scenario) (aioquic): \(index + 1)/\(options.iterations)")
        }
    }

    /// The capacity-datagrams load against aioquic counting (not echoing) what arrives; the count comes from the
    /// server's `datagrams_received N` line when it stops.
    private static func datagrams(
        _ result: inout ScenarioResult, _ address: ServerAddress, _ server: ChildServer,
        _ options: BenchOptions, _ environment: BenchEnvironment
    ) async throws {
        let connection = try await CapacityScenarios.client(options, environment).connect(to: address)
        let (offered, elapsed) = try await CapacityScenarios.offerDatagramLoad(connection)
        try await Task.sleep(for: .milliseconds(300))  // let the tail arrive
        let stats = await connection.statistics()
        await connection.close()
        let output = await server.stop().output
        result.figure("datagrams_offered_per_s", Double(offered) / elapsed)
        result.figure("datagrams_sent_per_s", Double(stats.datagramsSent) / elapsed)
        if let received = receivedCount(in: output) {
            result.figure("datagrams_received_per_s", Double(received) / elapsed)
        }
        result.figure("datagrams_dropped_before_send", Double(stats.datagramsExpired))
        result.note =
            "same load as ours (one connection, 80-byte frames, 100 ms deadline) against aioquic "
            + "(Python) counting what arrives" + (receivedCount(in: output) == nil ? "; it printed no count" : "")
    }

    /// The N of a `datagrams_received N` line.
    static func receivedCount(in output: String) -> Int? {
        for line in output.split(separator: "\n") where line.hasPrefix("datagrams_received ") {
            return Int(line.dropFirst("datagrams_received ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
