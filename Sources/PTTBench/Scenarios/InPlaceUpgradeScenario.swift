import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TransportCore

/// An in-place upgrade under live calls (issue 36, item 3): a child `serve --workers 2` and `calls` links each
/// sending a 20 ms audio frame the relay echoes; `beforeUpgrade` into the calls the supervisor gets SIGUSR2 (a new
/// generation of workers from the same executable takes new connections, the old one drains and its clients move),
/// and the calls go on. Figures (prefix `in_place_upgrade_`): calls, calls dropped (the link stopped, or no echo in
/// the call's last 3 s), calls moved (on another connection at the end), frames sent and lost (by sequence),
/// the longest gap between echoes of any call and its median over the calls (ms), the same two before the signal
/// (the load's share: frames sent before it that never came back, the longest gap between echoes), when each
/// call's longest silence after the signal began (median, ms after the signal), CPU seconds of this process
/// (the phones) and of the relay (the supervisor and every worker of both generations), from the calls' start.
enum InPlaceUpgradeScenario {
    static let calls = 100
    static let beforeUpgrade: Duration = .seconds(3)
    static let afterUpgrade: Duration = .seconds(6)

    static func run(
        _ name: String, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: name, iterations: calls)
        guard let executable = options.relayExecutable else {
            result.note = "needs the CLI executable to run the relay (serve --workers) as a child"
            return result
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-bench-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let arguments = [
            "serve", "--listen", "\(environment.serverHost):0", "--cert", options.certificate,
            "--key", options.privateKey, "--workers", "2", "--event-loops", "1", "--drain-seconds", "10",
            "--ticket-key", directory.appendingPathComponent("ticket.key").path,
            "--reset-secret", directory.appendingPathComponent("reset.key").path,
        ]
        let (command, all) = environment.serverSideCommand(executable, arguments)
        let relay = try await ChildServer.start(command, all)
        defer { _ = relay.stopNow() }
        guard let port = relay.address.split(separator: ":").last.flatMap({ UInt16($0) }) else {
            throw BenchError("in-place-upgrade: the relay printed no port (\(relay.address))")
        }
        let address = ServerAddress(host: environment.serverHost, port: port)
        let client = environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority),
                handshakeTimeout: .seconds(5), fallback: .quicOnly))
        let links = (0..<calls).map { _ in TransportLink(client: client, to: address) }
        defer { for link in links { link.stop() } }
        var first: [TransportConnection] = []
        for link in links {
            guard let ready = await firstResult(within: .seconds(20), { try? await link.nextReady() }) else {
                throw BenchError("in-place-upgrade: a link did not connect to the child relay within 20 s")
            }
            first.append(ready)
        }
        options.progress("\(name): \(calls) calls up")

        let echoed = links.map { _ in EchoedCall(lasting: beforeUpgrade + afterUpgrade) }
        let receivers = zip(links, echoed).map { link, call in call.record(link.datagrams) }
        defer { for receiver in receivers { receiver.cancel() } }
        let clientCPU = CPUTime.process()
        let relayCPU = CPUTime.processTree(relay.processIdentifier)
        let start = ContinuousClock.now + .milliseconds(100)
        let signal = Task {
            try await Task.sleep(until: start + beforeUpgrade)
            kill(relay.processIdentifier, SIGUSR2)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (link, call) in zip(links, echoed) {
                group.addTask {
                    try await call.talk(from: start) {
                        try? link.sendDatagram($0, expiresAfter: EchoedCall.frameExpiry)
                    }
                }
            }
            try await group.waitForAll()
        }
        try await signal.value
        try await Task.sleep(for: .milliseconds(300))  // the last echoes
        let clientSeconds = CPUTime.process() - clientCPU
        let relaySeconds = CPUTime.processTree(relay.processIdentifier) - relayCPU

        var (dropped, moved, framesSent, framesLost) = (0, 0, 0, 0)
        var gaps: [Double] = []
        // The same figures before the signal: what the load alone costs, beside what the upgrade adds.
        var (lostBefore, gapBefore) = (0, 0.0)
        var gapStarts: [Double] = []
        let framesBefore = Int(beforeUpgrade / EchoedCall.frameInterval)
        for (index, call) in echoed.enumerated() {
            let outcome = call.outcome(
                start: start, rttMilliseconds: environment.rttMilliseconds ?? 0, gapsFromStart: true)
            let lastSecond = call.frames - Int(Duration.seconds(3) / EchoedCall.frameInterval)
            let stopped = if case .stopped = links[index].status { true } else { false }
            if stopped || !outcome.arrivals.contains(where: { $0.frame >= lastSecond }) { dropped += 1 }
            if let now = links[index].connection, now !== first[index] { moved += 1 }
            framesSent += call.frames
            framesLost += outcome.framesLost
            gaps.append(outcome.longestGap.milliseconds)
            // Where the call's longest silence after the signal began: the new generation's start, or the move.
            let after = outcome.arrivals.filter { $0.at >= start + beforeUpgrade }
            if let widest = zip(after, after.dropFirst()).max(by: { $0.1.at - $0.0.at < $1.1.at - $1.0.at }) {
                gapStarts.append((widest.0.at - (start + beforeUpgrade)).milliseconds)
            }
            let before = outcome.arrivals.filter { $0.at < start + beforeUpgrade }
            lostBefore += framesBefore - Set(outcome.arrivals.map(\.frame).filter { $0 < framesBefore }).count
            for (earlier, later) in zip(before, before.dropFirst()) {
                gapBefore = max(gapBefore, (later.at - earlier.at).milliseconds)
            }
        }
        result.figure("in_place_upgrade_calls", Double(calls))
        result.figure("in_place_upgrade_calls_dropped", Double(dropped))
        result.figure("in_place_upgrade_calls_moved", Double(moved))
        result.figure("in_place_upgrade_frames_sent", Double(framesSent))
        result.figure("in_place_upgrade_frames_lost", Double(framesLost))
        result.figure("in_place_upgrade_longest_gap_ms", gaps.max() ?? 0)
        result.figure("in_place_upgrade_median_longest_gap_ms", Samples(gaps).p50 ?? 0)
        result.figure("in_place_upgrade_frames_lost_before_signal", Double(lostBefore))
        result.figure("in_place_upgrade_longest_gap_before_signal_ms", gapBefore)
        result.figure("in_place_upgrade_median_gap_start_after_signal_ms", Samples(gapStarts).p50 ?? 0)
        result.figure("in_place_upgrade_client_cpu_s", clientSeconds)
        result.figure("in_place_upgrade_relay_cpu_s", relaySeconds)
        result.note =
            "\(calls) calls on serve --workers 2, SIGUSR2 \(Int(beforeUpgrade.milliseconds)) ms in, "
            + "\(Int(afterUpgrade.milliseconds)) ms after; a call is dropped when its link stopped or none of its "
            + "last 3 s of frames came back; wall-clock gaps, noisy on a shared VM"
        return result
    }
}
