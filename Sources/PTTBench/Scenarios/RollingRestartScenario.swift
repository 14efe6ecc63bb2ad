import Foundation
import NetworkEmulation
import PTTTransport
import TransportCore
import TransportIO

/// A rolling restart at a real RTT (run with `--rtt`): two relays of one name on the emulated path's server side
/// (198.18.0.2 and 198.18.0.4, one port, one ticket key), a `TransportLink` on the first sending a 20 ms audio frame
/// that the relay echoes; 1 s in, that relay drains, the link moves to the other (make-before-break) and the call
/// goes on for 2 s. Each row is `callsPerRow` calls with one drain each. Figures (prefix `rolling_restart_`):
/// frames sent and lost (a frame is lost when its echo never reached the phone, by sequence), the longest gap between
/// echoes (ms, and in RTTs; the target is one frame interval plus 5 ms) and, for comparison, the longest before the
/// drain (the path's and the machine's own jitter), calls whose link moved, and the drain's duration (median ms: the
/// draining relay is done once its client left). Where a gap at the switch comes from: from the moment the first
/// frame went on the new connection, when the old connection's last echo and the new one's first arrived (medians).
enum RollingRestartScenario {
    static let frameInterval = EchoedCall.frameInterval
    static let beforeDrain: Duration = .seconds(1)
    static let afterDrain: Duration = .seconds(2)
    static let callsPerRow = 3
    /// The second relay's address on the server side of the path.
    static let secondRelayHost = "198.18.0.4"

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: callsPerRow)
        guard let network = environment.network else {
            result.note = "needs an emulated path (--rtt MS): a drain loses audio only at a real round-trip time"
            return result
        }
        try network.addAddress(secondRelayHost, on: .server)
        let keyFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-rolling-restart-\(getpid()).key").path
        _ = FileManager.default.createFile(
            atPath: keyFile, contents: Data((0..<64).map { _ in UInt8.random(in: 0...255) }),
            attributes: [.posixPermissions: 0o600])
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        var calls: [Call] = []
        for index in 0..<callsPerRow {
            calls.append(try await call(keyFile: keyFile, options: options, environment: environment))
            options.progress("\(name): call \(index + 1)/\(callsPerRow)")
        }
        let rtt = environment.rttMilliseconds ?? 0
        let longest = calls.map(\.longestGap).max() ?? 0
        result.figure("rolling_restart_frames_sent", Double(calls.reduce(0) { $0 + $1.framesSent }))
        result.figure("rolling_restart_frames_lost", Double(calls.reduce(0) { $0 + $1.framesLost }))
        result.figure("rolling_restart_longest_gap_ms", longest)
        result.figure("rolling_restart_longest_gap_before_drain_ms", calls.map(\.longestGapBeforeDrain).max() ?? 0)
        if rtt > 0 { result.figure("rolling_restart_longest_gap_rtt", longest / rtt) }
        result.figure("rolling_restart_target_gap_ms", frameInterval.milliseconds + 5)
        result.figure("rolling_restart_calls_moved", Double(calls.filter(\.moved).count))
        result.figure("rolling_restart_drain_median_ms", Samples(calls.map(\.drain)).p50 ?? 0)
        let switches = calls.compactMap(\.atSwitch)
        if !switches.isEmpty {
            result.figure("rolling_restart_last_old_echo_ms", Samples(switches.map(\.lastOld)).p50 ?? 0)
            result.figure("rolling_restart_first_new_echo_ms", Samples(switches.map(\.firstNew)).p50 ?? 0)
        }
        result.note =
            "\(callsPerRow) calls, a \(Int(frameInterval.milliseconds)) ms frame interval, the first relay drains "
            + "\(Int(beforeDrain.milliseconds)) ms into each call; wall-clock figures, set by the emulated RTT"
        return result
    }

    private struct Call {
        var framesSent: Int
        var framesLost: Int
        var longestGap: Double
        var longestGapBeforeDrain: Double
        var moved: Bool
        var drain: Double
        /// From when the first frame went on the new connection: the old connection's last echo, the new one's
        /// first (ms); nil when the link did not switch.
        var atSwitch: (lastOld: Double, firstNew: Double)?
    }

    private static func call(
        keyFile: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> Call {
        let clock = ContinuousClock()
        let configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey, ticketKeyFile: keyFile)
        let (first, address, firstRelay) = try await environment.startRelay(configuration)
        let (second, _, secondRelay) = try await environment.startRelay(
            configuration, host: secondRelayHost, port: address.port)
        defer {
            firstRelay.cancel()
            secondRelay.cancel()
        }
        let name = ServerAddress(host: "localhost", port: address.port)
        var client = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority), fallback: .quicOnly)
        client.resolve = [name: [address.host, secondRelayHost]]
        client.addressAttemptDelay = .seconds(1)  // the first relay answers first: the call starts there
        let link = TransportLink(client: environment.client(client), to: name)
        defer { link.stop() }
        _ = try await link.nextReady()

        let call = EchoedCall(lasting: beforeDrain + afterDrain)
        let receiver = call.record(link.datagrams)
        defer { receiver.cancel() }
        let start = clock.now
        var drain: Task<Duration, Never>?
        let firstConnection = link.connection?.id
        var firstOnNew: Int?  // the first frame the link sent on the new connection
        try await call.talk(from: start) { index in
            if firstOnNew == nil, let now = link.connection?.id, now != firstConnection { firstOnNew = index }
            guard drain == nil && clock.now - start >= beforeDrain else { return }
            drain = Task {
                let began = clock.now
                await first.drain(deadline: .seconds(8))
                return clock.now - began
            }
        } send: {
            try link.sendDatagram($0, expiresAfter: EchoedCall.frameExpiry)
        }
        let rtt = environment.rttMilliseconds ?? 0
        try await Task.sleep(for: .milliseconds(Int(2 * rtt) + 200))  // the last echoes
        let drained = await drain?.value ?? .zero
        let moved = link.connection?.remoteAddress.hasPrefix(secondRelayHost) ?? false
        await second.shutdown()
        await first.shutdown()

        let (arrivals, framesLost, longestGap) = call.outcome(
            start: start, rttMilliseconds: rtt, gapsFromStart: false)
        let beforeTheDrain = arrivals.map(\.at).filter { $0 < start + beforeDrain }
        let longestBefore = zip(beforeTheDrain, beforeTheDrain.dropFirst()).map { $1 - $0 }.max() ?? .zero
        var atSwitch: (Double, Double)?
        if let first = firstOnNew,
            let lastOld = arrivals.filter({ $0.frame < first }).map(\.at).max(),
            let firstNew = arrivals.filter({ $0.frame >= first }).map(\.at).min()
        {
            let sent = start + frameInterval * first
            atSwitch = ((lastOld - sent).milliseconds, (firstNew - sent).milliseconds)
        }
        return Call(
            framesSent: call.frames, framesLost: framesLost, longestGap: longestGap.milliseconds,
            longestGapBeforeDrain: longestBefore.milliseconds, moved: moved, drain: drained.milliseconds,
            atSwitch: atSwitch)
    }
}
