import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// A NAT rebinding in the middle of a call, on the emulated path: the client sends a 20 ms audio frame through the
/// echo relay, and 1 s in, the NAT in front of the client gives it a new source port (in the second row, a new
/// address) and deletes the old mapping, so whatever the relay still sends to the old endpoint is dropped. The
/// relay must follow the client to the new path. Each row is `callsPerRow` calls with one rebind each; figures
/// (prefix `port_rebind_` or `address_rebind_`): the longest gap between echoed frames over all calls and its
/// median per call (ms, and the longest in RTTs; the target is at most one RTT plus one frame interval), frames
/// lost, in how many calls the relay moved to the new path and how long after the rebind (median), and the delay
/// line's count of the relay's packets to the deleted mapping, in all and after the relay had moved. The relay
/// reports the move once the new path is validated; ngtcp2 then probes the old path with PATH_CHALLENGE (RFC 9000
/// section 9.3.3, a validation whose result it ignores), so a few packets per call still go there after the
/// move, and no audio: frames lost stay at those in flight when the NAT rebound.
enum RebindScenario {
    static let frameInterval = EchoedCall.frameInterval
    /// How long the call runs before the rebind, so it is steady when the NAT moves.
    static let beforeRebind: Duration = .seconds(1)
    /// How long it runs after, enough for path validation and a steady state on the new path.
    static let afterRebind: Duration = .seconds(2)
    /// Calls (one rebind each) per row.
    static let callsPerRow = 3

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: callsPerRow)
        guard let network = environment.network else {
            result.note =
                "needs an emulated path (--rtt MS): the rebinding NAT is part of its delay line, and a gap "
                + "is only meaningful against a round-trip time"
            return result
        }
        let rtt = environment.rttMilliseconds ?? 0
        for rewriteAddress in [false, true] {
            let prefix = rewriteAddress ? "address_rebind" : "port_rebind"
            var calls: [Call] = []
            for index in 0..<callsPerRow {
                calls.append(
                    try await call(
                        rewriteAddress: rewriteAddress, network: network, options: options, environment: environment))
                options.progress("\(name): \(prefix) call \(index + 1)/\(callsPerRow)")
            }
            report(calls, prefix: prefix, rtt: rtt, into: &result)
        }
        result.note =
            "\(callsPerRow) calls per row, a \(Int(frameInterval.milliseconds)) ms frame interval, the NAT rebinds "
            + "\(Int(beforeRebind.milliseconds)) ms into each call; wall-clock figures, set by the emulated RTT"
        return result
    }

    /// What one call with one rebind measured.
    private struct Call {
        var longestGap: Double
        var framesSent: Int
        var framesLost: Int
        /// The relay reported a new path and echoes reached the client after the old mapping was gone.
        var relayMoved: Bool
        /// From the rebind to the relay's move (ms); nil if it never moved.
        var movedAfter: Double?
        /// The relay's packets to the deleted mapping, in all and after the move.
        var toOldMapping: UInt64
        var toOldMappingAfterMove: UInt64
        var rebinds: UInt64
    }

    private static func report(_ calls: [Call], prefix: String, rtt: Double, into result: inout ScenarioResult) {
        let gaps = Samples(calls.map(\.longestGap))
        let longest = gaps.max ?? 0
        result.figure("\(prefix)_longest_gap_ms", longest)
        if rtt > 0 { result.figure("\(prefix)_longest_gap_rtt", longest / rtt) }
        result.figure("\(prefix)_median_gap_ms", gaps.p50 ?? 0)
        result.figure("\(prefix)_target_gap_ms", rtt + frameInterval.milliseconds)
        result.figure("\(prefix)_frames_sent", Double(calls.reduce(0) { $0 + $1.framesSent }))
        result.figure("\(prefix)_frames_lost", Double(calls.reduce(0) { $0 + $1.framesLost }))
        result.figure("\(prefix)_nat_rebinds", Double(calls.reduce(0) { $0 + $1.rebinds }))
        result.figure("\(prefix)_calls_relay_moved", Double(calls.filter(\.relayMoved).count))
        if let moved = Samples(calls.compactMap(\.movedAfter)).p50 {
            result.figure("\(prefix)_relay_moved_after_median_ms", moved)
        }
        result.figure("\(prefix)_packets_to_old_mapping", Double(calls.reduce(0) { $0 + $1.toOldMapping }))
        result.figure(
            "\(prefix)_packets_to_old_mapping_after_move", Double(calls.reduce(0) { $0 + $1.toOldMappingAfterMove }))
    }

    /// When the relay switched to the client's new address, and the delay line's NAT drops at that moment.
    private struct PathMove {
        let at: ContinuousClock.Instant
        let natDropped: UInt64
    }

    /// One call on a fresh connection to a fresh relay, with one rebind.
    private static func call(
        rewriteAddress: Bool, network: EmulatedNetwork, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> Call {
        let clock = ContinuousClock()
        let (server, address, _) = try await environment.startRelay(
            ServerConfiguration(quic: nil, certificateChain: options.certificate, privateKey: options.privateKey),
            behaviour: .none)
        let moves = Locked<[PathMove]>([])
        let relay = Task {
            await EchoRelay.run(server) { event in
                guard case .pathChanged = event else { return }
                let move = PathMove(at: clock.now, natDropped: network.counters.natDropped)
                moves.withLock { $0.append(move) }
            }
        }
        let client = environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority), fallback: .quicOnly))
        let connection = try await client.connect(to: address)
        let call = EchoedCall(lasting: beforeRebind + afterRebind)
        let receiver = call.record(connection.datagrams)
        let before = network.counters
        network.impair(
            Impairments(
                nat: NATRebinding(
                    firstRebind: UInt64(beforeRebind.milliseconds * 1_000_000), interval: nil,
                    rewriteAddress: rewriteAddress)))
        let start = clock.now
        let rebind = start + beforeRebind
        try await call.talk(from: start) { try connection.sendDatagram($0, expiresAfter: EchoedCall.frameExpiry) }
        let rtt = environment.rttMilliseconds ?? 0
        try await Task.sleep(for: .milliseconds(Int(2 * rtt) + 200))  // the last echoes
        let after = network.counters
        network.impair(Impairments())
        await connection.close()
        await receiver.value
        relay.cancel()
        await server.shutdown()

        let (received, framesLost, longestGap) = call.outcome(start: start, rttMilliseconds: rtt, gapsFromStart: true)
        let firstMove = moves.withLock { $0.first }
        // Every echo that left the relay after the rebind reached the client through the new mapping: the old
        // one is gone. An echo later than one RTT after the rebind is such an echo.
        let echoedOnNewPath = received.contains { $0.at - rebind > .milliseconds(Int(rtt.rounded(.up)) + 1) }
        return Call(
            longestGap: longestGap.milliseconds, framesSent: call.frames, framesLost: framesLost,
            relayMoved: firstMove != nil && echoedOnNewPath,
            movedAfter: firstMove.map { ($0.at - rebind).milliseconds },
            toOldMapping: after.natDropped - before.natDropped,
            toOldMappingAfterMove: firstMove.map { after.natDropped - $0.natDropped } ?? 0,
            rebinds: after.rebinds - before.rebinds)
    }
}
