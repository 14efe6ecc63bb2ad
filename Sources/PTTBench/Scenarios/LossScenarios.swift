import PTTTransport

/// Cold connects on a lossy path, once per initial RTT: the first estimate decides how soon a lost Initial or
/// server flight is re-sent (three times it, before any RTT sample), so it dominates handshake time under loss.
/// Both values run in one invocation on the same path, so the rows compare directly.
enum LossScenarios {
    /// ngtcp2's default (RFC 9002's 333 ms for an unknown path) and the library's default.
    static let initialRTTs: [Duration] = [.milliseconds(333), ClientConfiguration(serverName: "").initialRTT]

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> [ScenarioResult] {
        guard name == "cold-connect-loss" else {
            var result = ScenarioResult(scenario: name, iterations: options.iterations)
            result.note = "unknown scenario"
            return [result]
        }
        var results: [ScenarioResult] = []
        for initialRTT in initialRTTs {
            results.append(try await measure(name, initialRTT: initialRTT, options: options, environment: environment))
        }
        return results
    }

    /// `iterations` cold QUIC connects (no resumption) to one relay, client and relay with the same initial RTT.
    private static func measure(
        _ name: String, initialRTT: Duration, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> ScenarioResult {
        let milliseconds = Int(initialRTT.milliseconds.rounded())
        var result = ScenarioResult(
            scenario: "\(name) (initial RTT \(milliseconds) ms)", iterations: options.iterations)
        var serverConfiguration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey, earlyData: .disabled)
        serverConfiguration.initialRTT = initialRTT
        let (server, address, relay) = try await environment.startRelay(serverConfiguration)
        defer { relay.cancel() }
        var clientConfiguration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority),
            handshakeTimeout: .seconds(20), fallback: .quicOnly)
        clientConfiguration.initialRTT = initialRTT
        let client = environment.client(clientConfiguration)
        var handshakes = Samples()
        var failures = 0
        let clock = ContinuousClock()
        for index in 0..<options.iterations {
            let start = clock.now
            do {
                let connection = try await client.connect(to: address)
                handshakes.append((clock.now - start).milliseconds)
                await connection.close()
            } catch {
                failures += 1
            }
            options.progress("\(result.scenario): \(index + 1)/\(options.iterations)")
        }
        await server.shutdown()
        result.figure("initial_rtt_ms", Double(milliseconds))
        for (label, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)] {
            if let value = handshakes.percentile(p) { result.figure("handshake_\(label)_ms", value) }
        }
        result.figure("handshakes_failed", Double(failures))
        return result
    }
}
