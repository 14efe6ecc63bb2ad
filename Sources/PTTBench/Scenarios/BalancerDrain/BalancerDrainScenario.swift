import ChildProcesses
import Foundation
import Glibc
import NetworkEmulation
import PTTTransport
import TransportCore
import TransportIO

/// Issue 36's balancer target: "a balancer polling `/readyz` every 100 ms: 0 ms of audio lost in 10 drains behind
/// one virtual address". Three child relays (`serve --admin`, one ticket key, reset and token secret) behind a
/// ``ReadinessBalancer`` on loopback, which polls each `/readyz` every 100 ms, gives new flows to ready relays only
/// and keeps each flow where it began; one phone (`TransportLink` to the virtual address) in a call sending a 20 ms
/// audio frame the relay echoes. `balancerDrains` times, the relay carrying the call gets SIGTERM (it drains: its
/// phone moves through the virtual address to a relay the balancer still calls ready), is started again on its
/// ports once it exited, and the call goes on until the balancer sees it ready again.
///
/// Two rows: `balancer-drain`, the relays run with `--drain-notice 0.3` (`balancerDrainNotice`: `/readyz` 503 for
/// 300 ms before the drain asks the phone to move), and `balancer-drain-no-notice`, the control with `--drain-notice 0`: the phone's new
/// flow may reach the balancer before its next poll, which then hands it to the draining relay.
/// Figures (prefix `balancer_drain_`): drains, frames sent and lost (by sequence) and the audio lost (ms), the
/// longest gap between echoes and the longest before the first drain (the machine's own), drains after which the
/// call was on another relay, new flows the balancer gave a draining relay, new flows dropped for want of a ready
/// relay, when the balancer saw the drain (ms after SIGTERM, median and max), how long a drain took (median ms),
/// CPU seconds of this process (the phone and the balancer) and of the relays.
enum BalancerDrainScenario {
    static let relays = 3
    static let pollInterval: Duration = .milliseconds(100)
    static let drainSeconds = 5
    /// The call on a whole fleet before the first drain and after each restart.
    static let settle: Duration = .milliseconds(600)

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        guard let executable = options.relayExecutable else {
            var row = ScenarioResult(scenario: "balancer-drain", iterations: 0)
            row.note = "needs the CLI executable to run the relays (serve --admin) as children"
            return [row]
        }
        var rows: [ScenarioResult] = []
        var plan = [("balancer-drain", options.balancerDrainNotice)]
        if options.balancerControl { plan.append(("balancer-drain-no-notice", 0)) }
        for (name, notice) in plan {
            options.progress("\(name): \(options.balancerDrains) drains")
            rows.append(try await row(name, notice: notice, executable: executable, options: options))
        }
        return rows
    }

    private static func row(
        _ name: String, notice: Double, executable: String, options: BenchOptions
    ) async throws -> ScenarioResult {
        let drains = max(1, options.balancerDrains)
        var result = ScenarioResult(scenario: name, iterations: drains)
        let relayCPU = childrenCPU()
        let fleet = try await BalancedRelays.start(
            relays, executable: executable, options: options, drainNotice: notice, drainSeconds: drainSeconds)
        defer { fleet.stop() }
        let balancer = try ReadinessBalancer(backends: fleet.backends, pollInterval: pollInterval)
        defer { balancer.stop() }
        guard await until(.seconds(20), { (0..<relays).allSatisfy(balancer.isReady) }) else {
            throw BenchError("\(name): the balancer did not see every relay ready within 20 s")
        }
        let loop = try EventLoop(name: "balancer-phone")
        defer { loop.shutdown() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority), handshakeTimeout: .seconds(5),
                fallback: .quicOnly),
            loop: loop)
        let link = TransportLink(client: client, to: ServerAddress(host: "127.0.0.1", port: balancer.address.port))
        defer { link.stop() }
        guard await firstResult(within: .seconds(20), { try? await link.nextReady() }) != nil else {
            throw BenchError("\(name): the phone did not connect through the balancer within 20 s")
        }

        let clientCPU = CPUTime.process()
        let call = EchoedCall(lasting: .seconds(1))  // its recorder only: this call lasts until the drains are done
        let receiver = call.record(link.datagrams)
        defer { receiver.cancel() }
        let start = ContinuousClock.now
        let talking = Locked(true)
        let sender = Task { () -> Int in
            var index = 0
            while talking.withLock({ $0 }) {
                try? await Task.sleep(until: start + EchoedCall.frameInterval * index, clock: .continuous)
                try? link.sendDatagram(EchoedCall.frame(index), expiresAfter: EchoedCall.frameExpiry)
                index += 1
            }
            return index
        }
        try await Task.sleep(for: settle)
        let firstDrain = ContinuousClock.now
        var (moved, toDraining, timedOut) = (0, 0, 0)
        var noticed: [Double] = []
        var took: [Double] = []
        for round in 0..<drains {
            let target = balancer.statistics.lastUDPFlow ?? round % relays
            let flowsBefore = balancer.statistics.flows[target]
            let signalled = ContinuousClock.now
            if !(await fleet.drain(target, within: .seconds(drainSeconds + 10))) { timedOut += 1 }
            took.append((ContinuousClock.now - signalled).milliseconds)
            let seen = balancer.statistics.changes.first { $0.backend == target && !$0.ready && $0.at >= signalled }
            if let seen { noticed.append((seen.at - signalled).milliseconds) }
            toDraining += balancer.statistics.flows[target] - flowsBefore
            if let now = balancer.statistics.lastUDPFlow, now != target { moved += 1 }
            try await fleet.restart(target)
            guard await until(.seconds(20), { balancer.isReady(target) }) else {
                throw BenchError("\(name): relay \(target) was not ready again within 20 s of its restart")
            }
            options.progress("\(name): drain \(round + 1)/\(drains)")
            try await Task.sleep(for: settle)
        }
        talking.withLock { $0 = false }
        let sent = await sender.value
        // The last echoes: until every frame's came back, or 3 s (a loaded machine holds some up).
        _ = await until(.seconds(3)) {
            Set(call.outcome(start: start, rttMilliseconds: 0, gapsFromStart: false).arrivals.map(\.frame))
                .count >= sent
        }
        let clientSeconds = CPUTime.process() - clientCPU
        fleet.stop()
        let relaySeconds = childrenCPU() - relayCPU

        let arrivals = call.outcome(start: start, rttMilliseconds: 0, gapsFromStart: false).arrivals
            .filter { $0.frame < sent }
        let lost = sent - Set(arrivals.map(\.frame)).count
        let gaps = zip(arrivals, arrivals.dropFirst()).map { (gap: ($1.at - $0.at).milliseconds, at: $0.at) }
        let statistics = balancer.statistics
        result.figure("balancer_drain_drains", Double(drains))
        result.figure("balancer_drain_notice_ms", notice * 1000)
        result.figure("balancer_drain_poll_interval_ms", pollInterval.milliseconds)
        result.figure("balancer_drain_frames_sent", Double(sent))
        result.figure("balancer_drain_frames_lost", Double(lost))
        result.figure("balancer_drain_audio_lost_ms", Double(lost) * EchoedCall.frameInterval.milliseconds)
        result.figure("balancer_drain_longest_gap_ms", gaps.map(\.gap).max() ?? 0)
        result.figure(
            "balancer_drain_longest_gap_before_first_drain_ms",
            gaps.filter { $0.at < firstDrain }.map(\.gap).max() ?? 0)
        result.figure("balancer_drain_calls_moved", Double(moved))
        result.figure("balancer_drain_new_flows_to_draining_relay", Double(toDraining))
        result.figure("balancer_drain_flows_without_ready_relay", Double(statistics.flowsWithoutBackend))
        result.figure("balancer_drain_noticed_median_ms", Samples(noticed).p50 ?? 0)
        result.figure("balancer_drain_noticed_max_ms", noticed.max() ?? 0)
        result.figure("balancer_drain_drain_median_ms", Samples(took).p50 ?? 0)
        result.figure("balancer_drain_drains_timed_out", Double(timedOut))
        result.figure("balancer_drain_client_cpu_s", clientSeconds)
        result.figure("balancer_drain_relay_cpu_s", relaySeconds)
        result.note =
            "\(relays) child relays behind one virtual address, /readyz polled every "
            + "\(Int(pollInterval.milliseconds)) ms, --drain-notice \(notice); the relay carrying the call drains "
            + "and restarts \(drains) times; loopback, wall-clock gaps, noisy on a shared VM"
        return result
    }

    /// Polls `condition` every 20 ms until it holds (true) or `limit` passed (false).
    private static func until(_ limit: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// CPU seconds of this process's children that ended and were waited for (the relays once stopped).
    private static func childrenCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
