import Foundation
import Glibc
import PTTTransport
import Synchronization

/// Relay capacity on loopback: datagram rates, handshake rates, memory per idle connection. Figures are what the
/// run achieved on this machine; nothing here asserts a target.
enum CapacityScenarios {
    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: 1)
        switch name {
        case "capacity-datagrams": try await datagrams(&result, options, environment)
        case "capacity-handshakes": try await handshakes(&result, options, environment)
        case "capacity-memory": try await MemoryScenario.run(&result, options: options, environment: environment)
        case "capacity-fanout": try await FanoutScenario.run(&result, options: options, environment: environment)
        case "handshake-cost": try await HandshakeScenarios.cost(&result, options: options)
        case "wake-storm": try await HandshakeScenarios.storm(&result, options: options)
        case "quic-lb-cost": try await QUICLBCostScenario.run(&result, options: options)
        case "admin-cost": try await AdminCostScenario.run(&result, options: options, environment: environment)
        default: result.note = "not implemented in this build yet"
        }
        return result
    }

    private static func serverConfiguration(_ options: BenchOptions) -> ServerConfiguration {
        var configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate,
            privateKey: options.privateKey)
        configuration.maxStreamsPerConnection = 4
        if let loops = options.relayLoops { configuration.eventLoops = loops }
        return configuration
    }

    static func client(_ options: BenchOptions, _ environment: BenchEnvironment) -> TransportClient {
        environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority),
                idleTimeout: .seconds(120)))
    }

    /// Datagrams per second one connection should send (issue 13).
    static let datagramsSentTarget = 250_000.0

    /// Frames offered per burst of `offerDatagramLoad`: enough that the offer (about 4 bursts per ms) exceeds
    /// what one connection can send, so the figure is the connection's rate, not the load generator's.
    static let offeredBurst = 256

    /// One connection offers 80-byte audio frames in bursts of `offeredBurst` (with a 0.2 ms pause between bursts,
    /// so the load generator does not monopolise a core) for 2 s; the relay counts what arrives.
    private static func datagrams(
        _ result: inout ScenarioResult, _ options: BenchOptions,
        _ environment: BenchEnvironment
    ) async throws {
        let (server, address, relay) = try await environment.startRelay(serverConfiguration(options), behaviour: .none)
        let received = Atomic<Int>(0)
        let counter = Task {
            for await connection in server.connections {
                for await _ in connection.datagrams { received.add(1, ordering: .relaxed) }
            }
        }
        let connection = try await client(options, environment).connect(to: address)
        let (offered, elapsed) = try await offerDatagramLoad(connection)
        try await Task.sleep(for: .milliseconds(300))  // let the tail arrive
        let stats = await connection.statistics()
        result.figure("datagrams_offered_per_s", Double(offered) / elapsed)
        result.figure("datagrams_sent_per_s", Double(stats.datagramsSent) / elapsed)
        result.figure("datagrams_received_per_s", Double(received.load(ordering: .relaxed)) / elapsed)
        result.figure("datagrams_dropped_before_send", Double(stats.datagramsExpired))
        let sentPerSecond = Double(stats.datagramsSent) / elapsed
        result.note =
            "one connection, 80-byte frames, 100 ms deadline; sender and relay share this machine's cores; target "
            + ">= \(Int(datagramsSentTarget)) sent/s: \(sentPerSecond >= datagramsSentTarget ? "met" : "not met")"
        await connection.close()
        counter.cancel()
        relay.cancel()
        await server.shutdown()
    }

    /// Offers 80-byte frames in bursts of `offeredBurst` with a 0.2 ms pause between bursts for 2 s; returns how
    /// many were offered and the seconds it took.
    static func offerDatagramLoad(_ connection: TransportConnection) async throws -> (offered: Int, seconds: Double) {
        let frame = [UInt8](repeating: 0x42, count: 80)
        let clock = ContinuousClock()
        let start = clock.now
        var offered = 0
        while clock.now - start < .seconds(2) {
            for _ in 0..<offeredBurst {
                try connection.sendDatagram(frame, expiresAfter: .milliseconds(100))
                offered += 1
            }
            try await Task.sleep(for: .microseconds(200))
        }
        return (offered, (clock.now - start).milliseconds / 1000)
    }

    /// Full and resumed handshakes per second with 4 clients connecting in parallel for 2 s each.
    private static func handshakes(
        _ result: inout ScenarioResult, _ options: BenchOptions,
        _ environment: BenchEnvironment
    ) async throws {
        var configuration = serverConfiguration(options)
        configuration.earlyData = .disabled
        let (server, address, relay) = try await environment.startRelay(configuration)
        let client = client(options, environment)
        let warm = try await client.connect(to: address, earlyMessages: [EarlyMessage([1], replaySafe: true)])
        var state: ResumptionState?
        for _ in 0..<400 where warm.resumptionState == nil { try await Task.sleep(for: .milliseconds(5)) }
        state = warm.resumptionState
        await warm.close()
        for (label, saved) in [("full", nil), ("resumed", state)] as [(String, ResumptionState?)] {
            let clock = ContinuousClock()
            let start = clock.now
            let completed = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var count = 0
                        while clock.now - start < .seconds(2) {
                            let connection = try await client.connect(to: address, resuming: saved)
                            await connection.close()
                            count += 1
                        }
                        return count
                    }
                }
                return try await group.reduce(0, +)
            }
            result.figure("\(label)_handshakes_per_s", Double(completed) / ((clock.now - start).milliseconds / 1000))
            options.progress("capacity-handshakes: \(label) done")
        }
        result.note = "client and relay in one process on this machine's cores; each connect is closed at once"
        relay.cancel()
        await server.shutdown()
    }

    /// Raises RLIMIT_NOFILE towards `wanted` (up to the hard limit); returns the soft limit now in force.
    @discardableResult
    static func raiseFileLimit(to wanted: rlim_t) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        limit.rlim_cur = min(max(limit.rlim_cur, wanted), limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(clamping: limit.rlim_cur)
    }
}
