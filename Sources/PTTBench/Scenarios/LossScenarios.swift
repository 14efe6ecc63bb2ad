import PTTTransport

/// Cold connects on a lossy path, once per initial RTT: the first estimate decides how soon a lost Initial or
/// server flight is re-sent (three times it, before any RTT sample), so it dominates handshake time under loss.
/// Both values run in one invocation on the same path, so the rows compare directly.
enum LossScenarios {
    /// ngtcp2's default (RFC 9002's 333 ms for an unknown path) and the library's default.
    static let initialRTTs: [Duration] = [.milliseconds(333), ClientConfiguration(serverName: "").initialRTT]

    /// One result whose figures carry both initial RTTs: `initial_rtt_<N>ms_handshake_p50_ms`, `..._p90_ms`,
    /// `..._p99_ms` and `..._failed` (connects that did not complete within 20 s).
    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: name, iterations: options.iterations)
        guard name == "cold-connect-loss" else {
            result.note = "unknown scenario"
            return result
        }
        for initialRTT in initialRTTs {
            try await measure(&result, initialRTT: initialRTT, options: options, environment: environment)
        }
        return result
    }

    /// `iterations` cold QUIC connects (no resumption) to one relay, client and relay with the same initial RTT.
    private static func measure(
        _ result: inout ScenarioResult, initialRTT: Duration, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws {
        let prefix = "initial_rtt_\(Int(initialRTT.milliseconds.rounded()))ms"
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
            options.progress("\(result.scenario) \(prefix): \(index + 1)/\(options.iterations)")
        }
        await server.shutdown()
        for (label, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)] {
            if let value = handshakes.percentile(p) { result.figure("\(prefix)_handshake_\(label)_ms", value) }
        }
        result.figure("\(prefix)_failed", Double(failures))
    }
}
