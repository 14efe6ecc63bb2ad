import ChildProcesses
import Foundation
import PTTTransport

/// Connection-setup latency: how long from `connect` to the handshake, to the first response to a control
/// message, and to the first echoed audio datagram, cold and resumed.
enum SetupScenarios {
    static let message = Array("join channel 7; send the pending burst".utf8)

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: options.iterations)
        switch name {
        case "quic-full":
            try await measure(
                &result, options: options, environment: environment,
                earlyData: .enabled(
                    deliverBeforeHandshake: true), resume: false)
        case "quic-resumed":
            try await measure(
                &result, options: options, environment: environment, earlyData: .disabled,
                resume: true)
        case "quic-0rtt":
            try await measure(
                &result, options: options, environment: environment,
                earlyData: .enabled(
                    deliverBeforeHandshake: true), resume: true)
        case "quic-0rtt-talker":
            try await TalkerScenario.measure(&result, options: options, environment: environment)
        case "quic-0rtt-rejected":
            try await measureRejected(&result, options: options, environment: environment)
        case "tcp-full":
            try await measure(
                &result, options: options, environment: environment, earlyData: .disabled,
                resume: false, fallback: .tcpOnly, paths: .tcp)
        case "tcp-resumed":  // the relay's default policy: the replay-safe message may ride in TLS early data
            try await measure(
                &result, options: options, environment: environment, earlyData: .enabled(),
                resume: true, fallback: .tcpOnly, paths: .tcp)
        case "race-udp-blocked":
            try await measure(
                &result, options: options, environment: environment, earlyData: .disabled,
                resume: false, fallback: .race(), paths: .tcpWithUDPDropped)
        case "race-udp-known-blocked":
            try await measure(
                &result, options: options, environment: environment, earlyData: .enabled(),
                resume: true, fallback: .race(), paths: .tcpWithUDPDropped)
        default:
            result.note = "unknown scenario"
        }
        return result
    }

    private static func serverConfiguration(
        _ options: BenchOptions, earlyData: EarlyDataPolicy,
        ticketKeyFile: String? = nil
    ) -> ServerConfiguration {
        ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey,
            ticketKeyFile: ticketKeyFile, earlyData: earlyData)
    }

    static func client(
        _ options: BenchOptions, _ environment: BenchEnvironment,
        fallback: FallbackPolicy = .quicOnly
    ) -> TransportClient {
        environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority),
                fallback: fallback))
    }

    /// One relay; `iterations` connections, each resuming from the state the previous one saved.
    private static func measure(
        _ result: inout ScenarioResult, options: BenchOptions,
        environment: BenchEnvironment, earlyData: EarlyDataPolicy, resume: Bool,
        fallback: FallbackPolicy = .quicOnly,
        paths: BenchEnvironment.RelayPaths = .quic
    ) async throws {
        let (server, address, relay) = try await environment.startRelay(
            serverConfiguration(options, earlyData: earlyData), paths: paths)
        defer { relay.cancel() }
        let client = client(options, environment, fallback: fallback)
        var saved: ResumptionState?
        if resume { saved = try await once(client, address, resuming: nil).state }  // warm-up, not measured
        for index in 0..<options.iterations {
            let measured = try await once(client, address, resuming: resume ? saved : nil)
            result.record(measured)
            if resume { saved = measured.state ?? saved }
            options.progress("\(result.scenario): \(index + 1)/\(options.iterations)")
        }
        await server.shutdown()
    }

    /// 0-RTT rejected: every connection resumes against a freshly restarted relay on the same port (same ticket
    /// key, new anti-replay window), so TLS resumes but the early data is refused and re-sent in 1-RTT.
    private static func measureRejected(
        _ result: inout ScenarioResult, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws {
        let keyFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-bench-ticket-\(ProcessInfo.processInfo.processIdentifier)").path
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let configuration = serverConfiguration(
            options, earlyData: .enabled(deliverBeforeHandshake: true),
            ticketKeyFile: keyFile)
        let client = client(options, environment)
        var saved: ResumptionState?
        var port: UInt16?
        for index in 0...options.iterations {
            let (server, address, relay) = try await startRestartableRelay(configuration, environment, port: port)
            port = address.port
            let measured = try await once(client, address, resuming: saved)
            if index > 0 {
                result.record(measured)
                options.progress("\(result.scenario): \(index)/\(options.iterations)")
            }
            saved = measured.state ?? saved
            relay.cancel()
            await server.shutdown()
        }
    }

    /// The relay of `quic-0rtt-rejected`: the first one on a `StablePort` (outside the kernel's ephemeral range, so
    /// no client socket can take the port between two restarts); later ones on that port.
    static func startRestartableRelay(
        _ configuration: ServerConfiguration, _ environment: BenchEnvironment,
        port: UInt16?
    ) async throws
        -> (TransportServer, ServerAddress, Task<Void, Never>)
    {
        if let port { return try await environment.startRelay(configuration, port: port) }
        return try await StablePort.first { port in try await environment.startRelay(configuration, port: port) }
    }

    struct Measurement {
        var handshake: Double
        var firstResponse: Double
        /// nil when the datagram was lost (emulated loss): datagrams are never retransmitted.
        var firstDatagram: Double?
        var state: ResumptionState?
    }

    /// One measured connection: connect with an early control message, wait for its echo, echo one datagram,
    /// then wait (bounded) for the session ticket and close.
    /// `replaySafe: false` keeps the message out of 0-RTT (1-RTT resumption against a peer whose tickets allow
    /// early data).
    static func once(
        _ client: TransportClient, _ address: ServerAddress, resuming: ResumptionState?,
        replaySafe: Bool = true
    ) async throws -> Measurement {
        let clock = ContinuousClock()
        let start = clock.now
        let connection = try await client.connect(
            to: address, resuming: resuming,
            earlyMessages: [EarlyMessage(message, replaySafe: replaySafe)])
        let handshake = clock.now - start
        var messages = connection.earlyStream!.messages.makeAsyncIterator()
        guard try await messages.next() != nil else { throw BenchError("no echo of the control message") }
        let firstResponse = clock.now - start
        try connection.sendDatagram([UInt8](repeating: 0xa5, count: 80), expiresAfter: .milliseconds(500))
        let datagrams = connection.datagrams
        let echoed =
            await firstResult(within: .seconds(2)) {
                var iterator = datagrams.makeAsyncIterator()
                return await iterator.next()
            } != nil
        let firstDatagram = echoed ? (clock.now - start).milliseconds : nil
        for _ in 0..<400 where connection.resumptionState == nil { try await Task.sleep(for: .milliseconds(5)) }
        let state = connection.resumptionState
        await connection.close()
        return Measurement(
            handshake: handshake.milliseconds, firstResponse: firstResponse.milliseconds,
            firstDatagram: firstDatagram, state: state)
    }
}

extension ScenarioResult {
    mutating func record(_ measurement: SetupScenarios.Measurement) {
        handshake.append(measurement.handshake)
        firstResponse.append(measurement.firstResponse)
        if let value = measurement.firstDatagram { firstDatagram.append(value) }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}
