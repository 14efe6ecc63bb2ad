import Foundation
import PTTTransport

/// `quic-0rtt-talker`: a woken talker whose first audio frame rides in 0-RTT, to a relay that delivers early
/// datagrams at once (`EarlyDataPolicy.deliverEarlyDatagrams`). The figure is the time from `connect` to the
/// frame's echo; its floor is one round trip (quic-0rtt, whose frame waits for the handshake, takes about two).
enum TalkerScenario {
    static let frame = [UInt8](repeating: 0xa5, count: 80)

    static func measure(
        _ result: inout ScenarioResult, options: BenchOptions, environment: BenchEnvironment
    ) async throws {
        let configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey,
            earlyData: .enabled(deliverBeforeHandshake: true, deliverEarlyDatagrams: true))
        let (server, address, relay) = try await environment.startRelay(configuration)
        defer { relay.cancel() }
        let client = SetupScenarios.client(options, environment)
        var saved = try await SetupScenarios.once(client, address, resuming: nil).state  // warm-up, not measured
        for index in 0..<options.iterations {
            let measured = try await once(client, address, resuming: saved)
            result.record(measured)
            saved = measured.state ?? saved
            options.progress("\(result.scenario): \(index + 1)/\(options.iterations)")
        }
        await server.shutdown()
        if let p50 = result.firstDatagram.p50 {
            result.figure("first_datagram_p50_ms", p50)
            if let rtt = environment.rttMilliseconds, rtt > 0 { result.figure("first_datagram_p50_rtt", p50 / rtt) }
        }
        result.note =
            "first audio frame sent in 0-RTT with the join; relay delivers early datagrams at once "
            + "(floor: 1 RTT)"
    }

    /// One woken talker: connect with a replay-safe join and one audio frame in 0-RTT, wait for both echoes.
    private static func once(
        _ client: TransportClient, _ address: ServerAddress, resuming: ResumptionState?
    ) async throws -> SetupScenarios.Measurement {
        let clock = ContinuousClock()
        let start = clock.now
        let connection = try await client.connect(
            to: address, resuming: resuming,
            earlyMessages: [EarlyMessage(SetupScenarios.message, replaySafe: true)], earlyDatagrams: [frame])
        let handshake = clock.now - start
        let datagrams = connection.datagrams
        let echoed = await firstResult(within: .seconds(2)) {
            var iterator = datagrams.makeAsyncIterator()
            return await iterator.next()
        }
        let firstDatagram = echoed != nil ? (clock.now - start).milliseconds : nil
        var messages = connection.earlyStream!.messages.makeAsyncIterator()
        guard try await messages.next() != nil else { throw BenchError("no echo of the control message") }
        let firstResponse = clock.now - start
        for _ in 0..<400 where connection.resumptionState == nil { try await Task.sleep(for: .milliseconds(5)) }
        let state = connection.resumptionState
        await connection.close()
        return SetupScenarios.Measurement(
            handshake: handshake.milliseconds, firstResponse: firstResponse.milliseconds,
            firstDatagram: firstDatagram, state: state)
    }
}
