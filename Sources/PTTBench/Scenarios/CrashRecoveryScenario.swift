import Foundation

/// `crash-recovery`: how soon listening phones are back after their relay crashed and restarted with its peer
/// snapshot (`serve --peer-snapshot`, which sends each former client a stateless reset on start). Each round
/// (`--iterations`, at most `maxRounds`) kills a child `serve` with SIGKILL while `linksPerRound` `TransportLink`s
/// only listen, starts it again on the same port and times each link from the restarted relay listening to its
/// next `.ready` status. The same rounds without the snapshot are the control: those links stay on the connection
/// the relay forgot until their keep-alive (15 s), so they are only awaited `controlBound`. Two rows:
/// `crash-recovery` and `crash-recovery-no-snapshot`. Not in the default run (`bench` without `--scenario`): its
/// rounds take seconds each, mostly waiting for the snapshot and the settle.
enum CrashRecoveryScenario {
    static let maxRounds = 5
    static let linksPerRound = 3
    /// How long a link with the snapshot may take before the round counts it as not recovered.
    static let recoveryBound = Duration.seconds(10)
    /// How long the control's links are awaited.
    static let controlBound = Duration.seconds(2)

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        guard let executable = options.relayExecutable else {
            var result = ScenarioResult(scenario: "crash-recovery", iterations: 0)
            result.note = "needs the CLI executable to run the relay as a child it can kill (not in a test process)"
            return [result]
        }
        let rounds = max(1, min(options.iterations, maxRounds))
        var results: [ScenarioResult] = []
        for (name, snapshot, bound) in [
            ("crash-recovery", true, recoveryBound), ("crash-recovery-no-snapshot", false, controlBound),
        ] {
            var measured: [CrashRecoveryRound] = []
            for index in 0..<rounds {
                measured.append(
                    try await CrashRecoveryRound.run(
                        snapshot: snapshot, links: linksPerRound, bound: bound, executable: executable,
                        options: options, environment: environment))
                options.progress("\(name): \(index + 1)/\(rounds)")
            }
            results.append(
                report(name, measured, snapshot: snapshot, bound: bound, rtt: environment.rttMilliseconds))
        }
        return results
    }

    /// The row for `rounds`: recovery percentiles (also in round trips on an emulated path of `rtt` ms), the
    /// restart time beside them, and what they cover.
    static func report(
        _ name: String, _ rounds: [CrashRecoveryRound], snapshot: Bool, bound: Duration, rtt: Double? = nil
    ) -> ScenarioResult {
        var result = ScenarioResult(scenario: name, iterations: rounds.count)
        let links = rounds.reduce(0) { $0 + $1.links }
        let recovery = Samples(rounds.flatMap { $0.listeningToReady.map(\.milliseconds) })
        let restart = Samples(rounds.map(\.restart.milliseconds))
        let seconds = Int(bound.milliseconds / 1000)
        result.figure("rounds", Double(rounds.count))
        result.figure("links", Double(links))
        result.figure("links_recovered_within_\(seconds)s", Double(recovery.count))
        if let median = recovery.p50, let p90 = recovery.p90, let worst = recovery.max {
            result.figure("listening_to_ready_p50_ms", median)
            result.figure("listening_to_ready_p90_ms", p90)
            result.figure("listening_to_ready_max_ms", worst)
            if let rtt, rtt > 0 {
                result.figure("listening_to_ready_p50_rtt", median / rtt)
                result.figure("listening_to_ready_max_rtt", worst / rtt)
            }
        }
        if snapshot { result.figure("resumed_links", Double(rounds.reduce(0) { $0 + $1.resumed })) }
        result.figure("relay_restart_p50_ms", restart.p50 ?? 0)
        result.figure("relay_restart_max_ms", restart.max ?? 0)
        let setup =
            "\(rounds.count) round\(rounds.count == 1 ? "" : "s") of \(linksPerRound) listening links "
            + "(QUIC, 15 s keep-alive) on a child serve"
            + (snapshot ? " --peer-snapshot, all listed in it," : " without --peer-snapshot,")
            + " \(CrashRecoveryRound.settle.milliseconds / 1000) s settle, SIGKILL, serve again on the same port"
        if snapshot {
            let cpu = rounds.reduce(0) { $0 + $1.clientCPUSeconds } / Double(max(1, recovery.count))
            result.figure("client_cpu_per_recovered_link_ms", cpu * 1000)
            result.note =
                setup + "; listening_to_ready = restarted relay's `listening on` read (it sent its resets just "
                + "before printing it) to the link's next .ready: reset received, reconnect (resumed_links: TLS "
                + "resumed); relay_restart = SIGKILL to `listening on` (process start, keys, binding), not "
                + "included; client_cpu = this process's CPU, all threads, SIGKILL to the last link ready (the "
                + "links' reconnects, spawning the relay, the bench's watchers) / links recovered; wall-clock "
                + "figures, noisy on a shared VM"
        } else {
            result.note =
                setup + "; control: "
                + (recovery.isEmpty
                    ? "no link back on a new connection, not within \(seconds) s (a listening link learns of "
                        + "the restart at its next keep-alive, 15 s)"
                    : "\(recovery.count) of \(links) links back within \(seconds) s")
        }
        return result
    }
}
