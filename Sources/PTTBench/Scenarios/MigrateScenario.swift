import Foundation
import PTTTransport
import Synchronization
import TransportCore

/// A phone changes networks mid-call. `handover-migrate`: the client sends a 20 ms audio frame stream to an echo
/// relay and, one second in, moves its connection to a second local address with `migrate(to:)` (127.0.0.2 on
/// loopback; 198.18.0.3, a second address on the client side of the emulated path); the figures say how long
/// the echoes stopped (and, for scale, the longest silence before the move: scheduling noise on a busy machine),
/// how many frames were lost, and whether the relay saw a second handshake (it must not).
enum MigrateScenario {
    static let frameInterval = EchoedCall.frameInterval
    static let frames = 150
    static let migrateAtFrame = 50

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "handover-migrate", iterations: 1)
        try await migrate(&result, options, environment)
        return result
    }

    private static func migrate(
        _ result: inout ScenarioResult, _ options: BenchOptions, _ environment: BenchEnvironment
    ) async throws {
        let newAddress: String
        if let network = environment.network {
            newAddress = "198.18.0.3"
            try network.addAddress(newAddress, on: .client)
        } else {
            newAddress = "127.0.0.2"
        }
        let configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey)
        let (server, address, relay) = try await environment.startRelay(configuration, behaviour: .none)
        let handshakes = Atomic<Int>(0)
        let echoing = Atomic<Bool>(false)
        let echo = Task {
            for await connection in server.connections {
                handshakes.add(1, ordering: .relaxed)
                // The handler keeps the connection open (it is released when the connection closes).
                await connection.setDatagramHandler { datagram in try? connection.sendDatagram(datagram.payload) }
                echoing.store(true, ordering: .releasing)
            }
        }
        let connection = try await CapacityScenarios.client(options, environment).connect(to: address)
        let clock = ContinuousClock()
        // The first frame must not arrive before the relay echoes (it would wait in the relay's buffer instead).
        let setUp = clock.now
        while !echoing.load(ordering: .acquiring), clock.now - setUp < .seconds(2) {
            try await Task.sleep(for: .milliseconds(1))
        }
        let call = EchoedCall(lasting: frameInterval * frames)
        let recording = call.record(connection.datagrams)
        let start = clock.now
        var migration: Task<(local: String, took: Duration), any Error>?
        var migrationStart = Duration.zero
        try await call.talk(from: start) { index in
            guard index == migrateAtFrame + 1 else { return }
            migrationStart = clock.now - start
            migration = Task {
                let begun = clock.now
                let local = try await connection.migrate(to: LocalEndpoint(host: newAddress), waitingUpTo: .seconds(5))
                return (local, clock.now - begun)
            }
        } send: {
            try connection.sendDatagram($0, expiresAfter: EchoedCall.frameExpiry)
        }
        let moved = try await migration!.value
        try await Task.sleep(for: .milliseconds(max(500, Int(2 * (environment.rttMilliseconds ?? 0)))))
        recording.cancel()
        let (arrivals, framesLost, _) = call.outcome(start: start, rttMilliseconds: 0, gapsFromStart: false)
        let times = arrivals.map { $0.at - start }
        let stats = await connection.statistics()
        let rtt = environment.rttMilliseconds ?? stats.smoothedRTT.milliseconds
        // The longest silence between two echoes from the moment the migration started.
        let longestGap = longestSilence(times.filter { $0 >= migrationStart - frameInterval })
        // The same before the move (from the second echo on): how much of the gap this machine's scheduling makes.
        let baseline = longestSilence(times.filter { $0 < migrationStart }.dropFirst())
        result.figure("longest_audio_gap_ms", longestGap)
        result.figure("longest_audio_gap_rtt", rtt > 0 ? longestGap / rtt : 0)
        result.figure("target_gap_ms", rtt + frameInterval.milliseconds)
        result.figure("longest_gap_before_ms", baseline)
        result.figure("frames_lost", Double(framesLost))
        result.figure("migrate_call_ms", moved.took.milliseconds)
        result.figure("migrations", Double(stats.migrations))
        result.figure("second_handshake", handshakes.load(ordering: .relaxed) > 1 ? 1 : 0)
        result.note =
            "\(frames) frames of 80 B every 20 ms; migrate(to: \(newAddress)) after \(migrateAtFrame); "
            + "now on \(moved.local); gap = longest silence between echoes after the move began "
            + "(target: 1 RTT + one frame interval); wall-clock figures, noisy on a shared VM"
        await connection.close()
        echo.cancel()
        relay.cancel()
        await server.shutdown()
    }

    /// The longest time between two consecutive arrivals, in ms.
    private static func longestSilence<C: Collection<Duration>>(_ times: C) -> Double {
        zip(times.dropFirst(), times).map { ($0 - $1).milliseconds }.max() ?? 0
    }
}
