import PTTTransport
import TransportIO

/// A NAT rebinding in the middle of a call, on the emulated path: the client sends a 20 ms audio frame through the
/// echo relay, and 1 s in, the NAT in front of the client gives it a new source port (then, in a second run, a new
/// address) and deletes the old mapping, so whatever the relay still sends to the old endpoint is dropped. The
/// relay must follow the client to the new path. Figures per run (prefix `port_rebind_` or `address_rebind_`):
/// the longest gap between echoed frames (ms and RTTs; the target is at most one RTT plus one frame interval),
/// frames lost, when the relay moved to the new path, and the delay line's count of the relay's packets to the
/// deleted mapping, in all and after the relay moved (none expected once it validated the new path).
enum HandoverScenario {
    static let frameInterval: Duration = .milliseconds(20)
    /// Frames before the rebind, so the call is steady when the NAT moves.
    static let beforeRebind: Duration = .seconds(1)
    /// Frames after it, long enough for path validation and a steady state on the new path.
    static let afterRebind: Duration = .seconds(2)

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws
        -> ScenarioResult
    {
        var result = ScenarioResult(scenario: name, iterations: 1)
        guard let network = environment.network else {
            result.note =
                "needs an emulated path (--rtt MS): the rebinding NAT is part of its delay line, and a gap "
                + "is only meaningful against a round-trip time"
            return result
        }
        for rewriteAddress in [false, true] {
            try await measure(
                &result, rewriteAddress: rewriteAddress, network: network, options: options,
                environment: environment)
        }
        result.note =
            "one call per row, a \(Int(frameInterval.milliseconds)) ms frame interval, the NAT rebinds "
            + "\(Int(beforeRebind.milliseconds)) ms in; wall-clock figures, set by the emulated RTT"
        return result
    }

    /// When the relay switched to the client's new address, and the delay line's NAT drops at that moment.
    private struct PathMove {
        let at: ContinuousClock.Instant
        let natDropped: UInt64
    }

    /// One call with one rebind; adds its figures to `result`.
    private static func measure(
        _ result: inout ScenarioResult, rewriteAddress: Bool, network: EmulatedNetwork, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws {
        let prefix = rewriteAddress ? "address_rebind" : "port_rebind"
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
        let arrivals = Locked<[(frame: Int, at: ContinuousClock.Instant)]>([])
        let receiver = Task {
            for await datagram in connection.datagrams where datagram.payload.count >= 4 {
                let frame = datagram.payload.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                let now = clock.now
                arrivals.withLock { $0.append((frame, now)) }
            }
        }
        let before = network.counters
        network.impair(
            Impairments(
                nat: NATRebinding(
                    firstRebind: UInt64(beforeRebind.milliseconds * 1_000_000), interval: nil,
                    rewriteAddress: rewriteAddress)))
        let start = clock.now
        let rebind = start + beforeRebind
        let frames = Int((beforeRebind + afterRebind) / frameInterval)
        for index in 0..<frames {
            try await Task.sleep(until: start + frameInterval * index, clock: clock)
            var frame = [UInt8](repeating: 0x42, count: 80)
            for byte in 0..<4 { frame[byte] = UInt8(truncatingIfNeeded: index >> (8 * (3 - byte))) }
            try connection.sendDatagram(frame, expiresAfter: .milliseconds(100))
        }
        let rtt = environment.rttMilliseconds ?? 0
        try await Task.sleep(for: .milliseconds(Int(2 * rtt) + 200))  // the last echoes
        let after = network.counters
        network.impair(Impairments())
        await connection.close()
        await receiver.value
        relay.cancel()
        await server.shutdown()

        let received = arrivals.withLock { $0 }
        let firstMove = moves.withLock { $0.first }
        var longestGap = (received.first?.at ?? clock.now) - start
        for (earlier, later) in zip(received, received.dropFirst()) {
            longestGap = max(longestGap, later.at - earlier.at)
        }
        let gap = longestGap.milliseconds
        result.figure("\(prefix)_longest_gap_ms", gap)
        if rtt > 0 { result.figure("\(prefix)_longest_gap_rtt", gap / rtt) }
        result.figure("\(prefix)_target_gap_ms", rtt + frameInterval.milliseconds)
        result.figure("\(prefix)_frames_sent", Double(frames))
        result.figure("\(prefix)_frames_lost", Double(frames - Set(received.map(\.frame)).count))
        // Every echo that left the relay after the rebind reached the client through the new mapping: the old
        // one is gone. An echo later than one RTT after the rebind is such an echo.
        let echoedOnNewPath = received.contains { $0.at - rebind > .milliseconds(Int(rtt.rounded(.up)) + 1) }
        result.figure("\(prefix)_relay_moved", firstMove != nil && echoedOnNewPath ? 1 : 0)
        if let firstMove {
            result.figure("\(prefix)_relay_moved_after_ms", (firstMove.at - rebind).milliseconds)
            result.figure(
                "\(prefix)_packets_to_old_mapping_after_move", Double(after.natDropped - firstMove.natDropped))
        }
        result.figure("\(prefix)_packets_to_old_mapping", Double(after.natDropped - before.natDropped))
        result.figure("\(prefix)_nat_rebinds", Double(after.rebinds - before.rebinds))
        options.progress("\(result.scenario): \(prefix) done")
    }
}
