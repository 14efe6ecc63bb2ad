import ChildProcesses
import Foundation
import PTTTransport
import TransportIO

/// What a handshake costs the relay over real sockets, beside the floor ngtcp2 + GnuTLS allow (`HandshakeFloor`,
/// measured in the same run), and what a wake storm does to the last phone's wait. The relay runs as a child
/// `serve` (CPU from its process CPU-time clock, nanoseconds), configured for one host playing every phone: no
/// per-source budget and no Retry under load (`--no-source-limits --retry-above off`), so the figures are the
/// transport's, not admission control's. Always on loopback.
enum HandshakeScenarios {
    static let stormSizes = [100, 500, 1_000]
    /// With `--iterations` below 10: a quick look.
    static let quickStormSizes = [20, 50]

    /// `handshake-cost`: sequential full, then resumed 0-RTT connections; relay CPU per handshake.
    static func cost(_ result: inout ScenarioResult, options: BenchOptions) async throws {
        guard let executable = options.relayExecutable else {
            result.note = "needs the CLI executable to run the relay as a child (not available in a test process)"
            return
        }
        let count = max(50, options.iterations * 4)
        let floor = try await floorFigures(&result, options: options)
        let relay = try await startRelay(executable, options)
        let loop = try EventLoop(name: "bench-handshakes")
        defer { loop.shutdown() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority), fallback: .quicOnly),
            loop: loop)
        let address = ServerAddress(relay.address)!
        var saved: ResumptionState?
        for (name, resumed, floorCPU) in [
            ("full", false, floor.fullServer), ("resumed", true, floor.resumedServer),
        ] {
            let before = CPUTime.process(relay.processIdentifier)
            let clientBefore = CPUTime.process()
            for index in 0..<count {
                let measured = try await SetupScenarios.once(client, address, resuming: resumed ? saved : nil)
                saved = measured.state ?? saved
                options.progress("\(result.scenario): \(name) \(index + 1)/\(count)")
            }
            let perHandshake = (CPUTime.process(relay.processIdentifier) - before) / Double(count)
            result.figure("relay_cpu_per_\(name)_ms", perHandshake * 1000)
            result.figure("relay_cpu_per_\(name)_over_floor", perHandshake / floorCPU)
            result.figure("client_cpu_per_\(name)_ms", (CPUTime.process() - clientBefore) / Double(count) * 1000)
        }
        _ = await relay.stop()
        result.note =
            "\(count) sequential connections each (join + datagram echoed, ticket saved); relay = child serve, "
            + "process CPU clock (clock_getcpuclockid); client = this process's CPU over the same connections; "
            + "floor = in-memory ngtcp2+GnuTLS, thread CPU clock"
            + (options.relayAntiReplay.map { "; anti-replay store: \($0)" } ?? "")
    }

    /// `wake-storm`: N phones with saved state wake at once (0-RTT "join"); when did the last get its answer?
    static func storm(_ result: inout ScenarioResult, options: BenchOptions) async throws {
        guard let executable = options.relayExecutable, let lab = options.labExecutable else {
            result.note = "needs ptt-transport and ptt-lab to run relay and load generator as children"
            return
        }
        let sizes = options.iterations < 10 ? quickStormSizes : stormSizes
        let floor = try await floorFigures(&result, options: options, liveCount: sizes.max() ?? 0)
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let relay = try await startRelay(executable, options)
        let loadLoops = Int(cores)
        for size in sizes {
            options.progress("\(result.scenario): \(size) phones saving state")
            let load = try await ChildServer.start(
                lab,
                [
                    "wake-storm-load", "--relay", relay.address, "--ca", options.certificateAuthority, "--clients",
                    "\(size)", "--loops", "\(loadLoops)",
                ],
                readyWithin: .seconds(300))
            let before = CPUTime.process(relay.processIdentifier)
            options.progress("\(result.scenario): \(size) phones waking")
            let line = await load.line(startingWith: "result ", within: .seconds(120))
            let spent = CPUTime.process(relay.processIdentifier) - before
            // The phones hang up only now: wait for it, so the next size meets a relay without them.
            _ = await load.line(startingWith: "closed ", within: .seconds(60))
            _ = await load.stop()
            guard let line, let storm = StormOutcome(line) else {
                result.note = "the load generator of \(size) phones printed no result"
                continue
            }
            let floorMilliseconds = Double(size) * (floor.resumedClient + floor.resumedServer) / cores * 1000
            let prefix = "n\(size)_"
            result.figure(prefix + "last_answer_p50_ms", storm.answers.p50 ?? 0)
            result.figure(prefix + "last_answer_p99_ms", storm.answers.p99 ?? 0)
            result.figure(prefix + "last_answer_max_ms", storm.answers.max ?? 0)
            result.figure(prefix + "floor_ms", floorMilliseconds)
            result.figure(prefix + "max_over_floor", (storm.answers.max ?? 0) / floorMilliseconds)
            let liveFloorMilliseconds =
                Double(size) * (floor.liveResumedClient + floor.liveResumedServer) / cores * 1000
            result.figure(prefix + "live_floor_ms", liveFloorMilliseconds)
            result.figure(prefix + "max_over_live_floor", (storm.answers.max ?? 0) / liveFloorMilliseconds)
            let perHandshake = spent / Double(max(1, storm.answers.count))
            result.figure(prefix + "relay_cpu_per_resumed_ms", perHandshake * 1000)
            result.figure(prefix + "relay_cpu_over_floor", perHandshake / floor.resumedServer)
            result.figure(prefix + "relay_cpu_over_live_floor", perHandshake / floor.liveResumedServer)
            result.figure(prefix + "load_cpu_per_resumed_ms", storm.cpu / Double(max(1, storm.answers.count)) * 1000)
            result.figure(prefix + "early_accepted", Double(storm.earlyAccepted))
            result.figure(prefix + "failed", Double(storm.failed))
        }
        _ = await relay.stop()
        result.note =
            "load generator = child process, \(loadLoops) client loops (one TransportClient each, phones "
            + "round-robin); load_cpu = its process CPU during the storm; relay = child serve "
            + "--no-source-limits --retry-above off; floor = N x in-memory (client + relay) CPU per resumed "
            + "handshake / \(Int(cores)) cores; live floor = the same with \(floor.liveCount) in-memory "
            + "connections held open at once, as the storm holds them; answer times from the storm's start; the "
            + "phones stay connected (they woke to hear the burst) and hang up after the last answer, outside the "
            + "figures"
    }

    /// The in-memory floor, added to `result` (ms of CPU per handshake per side).
    private static func floorFigures(
        _ result: inout ScenarioResult, options: BenchOptions, liveCount: Int = 0
    ) async throws
        -> HandshakeFloor
    {
        options.progress("\(result.scenario): in-memory floor")
        let floor = try await HandshakeFloor.measure(
            certificate: options.certificate, privateKey: options.privateKey, ca: options.certificateAuthority,
            count: 200, liveCount: liveCount)
        result.figure("floor_full_client_cpu_ms", floor.fullClient * 1000)
        result.figure("floor_full_server_cpu_ms", floor.fullServer * 1000)
        result.figure("floor_resumed_client_cpu_ms", floor.resumedClient * 1000)
        result.figure("floor_resumed_server_cpu_ms", floor.resumedServer * 1000)
        if liveCount > 0 {
            result.figure("floor_live_resumed_client_cpu_ms", floor.liveResumedClient * 1000)
            result.figure("floor_live_resumed_server_cpu_ms", floor.liveResumedServer * 1000)
        }
        if floor.failures > 0 { result.figure("floor_failures", Double(floor.failures)) }
        return floor
    }

    private static func startRelay(_ executable: String, _ options: BenchOptions) async throws -> ChildServer {
        try await ChildServer.start(
            executable,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", options.certificate, "--key", options.privateKey,
                "--no-source-limits", "--retry-above", "off",
            ] + (options.relayAntiReplay.map { ["--anti-replay", $0] } ?? []))
    }
}

/// The `result {json}` line of `wake-storm-load`.
struct StormOutcome {
    var answers = Samples()
    var earlyAccepted = 0
    var failed = 0
    /// The load generator's process CPU during the storm, seconds.
    var cpu = 0.0

    init?(_ line: String) {
        guard
            let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst("result ".count).utf8))
                as? [String: Any],
            let answers = object["answers_ms"] as? [Double]
        else { return nil }
        self.answers.append(contentsOf: answers)
        earlyAccepted = object["early_accepted"] as? Int ?? 0
        failed = object["failed"] as? Int ?? 0
        cpu = object["cpu_s"] as? Double ?? 0
    }
}
