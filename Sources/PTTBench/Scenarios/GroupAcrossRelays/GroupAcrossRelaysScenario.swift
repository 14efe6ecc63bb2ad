import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore

/// `group-across-relays` (issue 35): one talk group over three child relays started with the command line
/// (a Redis the bench starts, no trunk option), phones spread over them in this process. Measured, in this order:
/// the mouth-to-ear added by one relay hop (a listener on another relay than the talker's against one on the
/// talker's), request → grant from a relay that is not the home against one at the home, store commands per burst,
/// relay CPU per trunk-forwarded copy against per local fan-out copy, double grants over `contestedRequests`
/// contested requests (three phones on three relays asking at once, round after round; `--iterations` × 200
/// when fewer), and the re-home time after
/// the home's SIGKILL with the frames the survivors' listeners heard of a burst started after it. Opt-in.
enum GroupAcrossRelaysScenario {
    static let name = "group-across-relays"
    static let contestedRequests = 10_000
    /// The contested rounds stop here even short of `contestedRequests` (the figure says how many ran).
    static let contestedBudget = Duration.seconds(120)
    static let burstFrames = 250
    static let cpuFrames = 300

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        var result = ScenarioResult(scenario: name, iterations: 0)
        guard let executable = options.relayExecutable else {
            result.note = "needs the CLI executable to run the relays as children (not in a test process)"
            return [result]
        }
        guard environment.rttMilliseconds == nil else {
            result.note = "loopback only: the relays run as children outside the emulated path"
            return [result]
        }
        do {
            let fleet = try await FleetOfRelays.start(executable: executable, options: options)
            defer { fleet.stop() }
            do {
                try await measure(into: &result, fleet: fleet, options: options, environment: environment)
            } catch {
                // A relay that ended says why on stderr.
                let ended = fleet.relays.enumerated().filter { !$0.element.isRunning }.map { index, relay in
                    "relay \(index) ended (\(relay.terminationStatus)): "
                        + relay.errorOutput().split(separator: "\n").filter {
                            $0.contains("rror") || $0.contains("Crash") || $0.contains(" at /")
                        }.prefix(12).joined(separator: " | ")
                }
                throw BenchError("\(error)" + (ended.isEmpty ? "" : "; " + ended.joined(separator: "; ")))
            }
        } catch {
            result.note = "could not run: \(error)"
        }
        return [result]
    }

    /// A group name whose home over `names` is `names[home]`.
    static func group(_ prefix: String, home: Int, over names: [String]) -> String {
        (0..<10_000).lazy.map { "\(prefix)-\($0)" }.first { RendezvousOrder.home($0, over: names) == names[home] }!
    }

    private static func measure(
        into result: inout ScenarioResult, fleet: FleetOfRelays, options: BenchOptions, environment: BenchEnvironment
    ) async throws {
        let names = fleet.names
        let addresses = try names.map { name in
            try ServerAddress(name).orThrow(BenchError("a relay listens on \(name), not HOST:PORT"))
        }
        let client = environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority), handshakeTimeout: .seconds(10),
                fallback: .quicOnly))
        var phones: [HopPhone] = []
        defer { for phone in phones { phone.phone.stop() } }
        func phone(_ user: String, _ group: String, at relay: Int) async throws -> HopPhone {
            let made = try HopPhone(user: user, group: group, client: client, relay: addresses[relay])
            phones.append(made)
            _ = try await ReconnectScenario.within(.seconds(20)) { try await made.ready() }
            return made
        }
        // The group homed at relay 0; a talker and a listener on each relay.
        let group = group("hop", home: 0, over: names)
        var talkers: [HopPhone] = []
        var listeners: [HopPhone] = []
        for relay in 0..<3 {
            talkers.append(try await phone("t\(relay)", group, at: relay))
            listeners.append(try await phone("l\(relay)", group, at: relay))
        }
        // Ready once a member of relay 1 is granted by the home (the trunks are up, the home settled).
        options.progress("\(name): waiting for the trunks and the home")
        let settled = ContinuousClock.now
        var first: UInt64?
        while first == nil, ContinuousClock.now - settled < .seconds(30) {
            first = try await talkers[1].takeFloor(within: .seconds(2))
            if first == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        guard first != nil else { throw BenchError("no grant from the home for a member of another relay in 30 s") }
        try await talkers[1].phone.releaseFloor()
        try await Task.sleep(for: .milliseconds(200))

        // 1. Mouth-to-ear added per hop: talker on relay 1, listeners on relay 1 (local) and relays 0, 2 (one hop).
        options.progress("\(name): one burst of \(burstFrames) frames for the per-hop latency")
        guard let burst = try await talkers[1].takeFloor() else { throw BenchError("the talker was not granted") }
        try await talkers[1].talk(frames: burstFrames)
        try await Task.sleep(for: .milliseconds(500))
        let local = listeners[1].arrivals(of: burst)
        var added = Samples()
        var missing: [Int] = []
        for remote in [listeners[0], listeners[2]] {
            let arrivals = remote.arrivals(of: burst)
            missing.append(burstFrames - arrivals.count)
            for (sequence, at) in arrivals { if let here = local[sequence] { added.append((at - here).milliseconds) } }
        }
        result.figure("relay_event_loops", Double(options.relayLoops ?? ProcessInfo.processInfo.activeProcessorCount))
        result.figure("hop_added_p50_ms", added.p50 ?? -1)
        result.figure("hop_added_p99_ms", added.p99 ?? -1)
        result.figure("hop_frames_missing", Double(missing.reduce(0, +) + burstFrames - local.count))
        result.figure("hop_frames_missing_at_home", Double(missing[0]))
        result.figure("hop_frames_missing_at_third_relay", Double(missing[1]))
        result.figure("hop_frames_missing_local", Double(burstFrames - local.count))

        // 2. Request → grant: from relay 1 (the home's grant crosses a trunk) and at the home (relay 0).
        options.progress("\(name): request → grant, 50 from another relay and 50 at the home")
        for (row, talker) in [("remote", talkers[1]), ("home", talkers[0])] {
            var grant = Samples()
            for _ in 0..<50 {
                let asked = ContinuousClock.now
                guard try await talker.takeFloor() != nil else { continue }
                grant.append((ContinuousClock.now - asked).milliseconds)
                try await talker.phone.releaseFloor()
                try await Task.sleep(for: .milliseconds(30))
            }
            result.figure("grant_\(row)_p50_ms", grant.p50 ?? -1)
            result.figure("grant_\(row)_p99_ms", grant.p99 ?? -1)
        }

        // 3. Store commands per burst: ten short bursts against the same time idle (heartbeats, member writes).
        options.progress("\(name): store commands per burst")
        let idleStart = await fleet.storeCommands()
        let idleClock = ContinuousClock.now
        try await Task.sleep(for: .seconds(3))
        let idleRate =
            ((await fleet.storeCommands() ?? 0) - (idleStart ?? 0)) / (ContinuousClock.now - idleClock).seconds
        let busyStart = await fleet.storeCommands()
        let busyClock = ContinuousClock.now
        var bursts = 0
        for _ in 0..<10 where try await talkers[1].takeFloor() != nil {
            try await talkers[1].talk(frames: 5)
            bursts += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        let busy = (await fleet.storeCommands() ?? 0) - (busyStart ?? 0)
        let busySeconds = (ContinuousClock.now - busyClock).seconds
        result.figure("store_commands_idle_per_s", idleRate)
        result.figure("store_commands_per_burst", (busy - idleRate * busySeconds) / Double(max(1, bursts)))

        // 4. Relay CPU per copy: relay 1 fans a talker's frames out to one local listener, then sends them to one
        // listener on relay 2 over the trunk (groups homed at relay 1, so no other relay follows them).
        options.progress("\(name): relay CPU per local copy and per trunk copy")
        let cpu = try await copyCost(fleet: fleet, names: names, phone: phone)
        result.figure("relay_cpu_us_per_local_copy", cpu.local)
        result.figure("relay_cpu_us_per_trunk_copy", cpu.trunk)
        result.figure("trunk_to_local_cpu_ratio", cpu.local > 0 ? cpu.trunk / cpu.local : -1)
        result.figure("receiving_relay_cpu_us_per_trunk_frame", cpu.receiving)

        // 5. Contested requests from three relays, round after round: never two holders at once.
        options.progress("\(name): contested requests")
        // 10,000 with the default --iterations (50); fewer for a short run.
        let contested = try await contest(talkers, requests: min(contestedRequests, max(30, options.iterations * 200)))
        result.figure("contested_requests", Double(contested.requests))
        result.figure("contested_grants", Double(contested.grants))
        result.figure("double_grants", Double(contested.doubles))

        // 6. The home killed: request again from relay 1 until granted; a burst then, heard on relays 1 and 2.
        options.progress("\(name): SIGKILL of the home")
        listeners[0].phone.stop()
        talkers[0].phone.stop()
        try await Task.sleep(for: .milliseconds(300))
        fleet.relays[0].kill()
        let killed = ContinuousClock.now
        var regranted: UInt64?
        while regranted == nil, ContinuousClock.now - killed < .seconds(10) {
            regranted = try await talkers[1].takeFloor(within: .seconds(1))
            if regranted == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        result.figure("rehome_ms", regranted == nil ? -1 : (ContinuousClock.now - killed).milliseconds)
        if let regranted {
            try await talkers[1].talk(frames: 50)
            try await Task.sleep(for: .milliseconds(500))
            let heard = listeners[1].arrivals(of: regranted).count + listeners[2].arrivals(of: regranted).count
            result.figure("after_rehome_frames_missing", Double(100 - heard))
        }
        result.iterations = 1
        result.note =
            "3 child relays (serve with the issue's options, loopback), Redis started by the bench; hop_added = "
            + "arrival at a listener on another relay − arrival at one on the talker's relay, same frame, "
            + "\(burstFrames) frames; grant = request → granted (50 each, remote: the home is another relay); "
            + "store_commands_per_burst = Redis commands during 10 bursts of 5 frames minus the idle rate; "
            + "relay CPU from /proc, \(cpuFrames) frames at 50/s, idle rate subtracted (noisy on a shared VM); "
            + "contested: 3 phones on 3 relays ask at once per round, grants checked for overlap, at most "
            + "\(Int(contestedBudget.seconds)) s; rehome = SIGKILL of the home → a member of another relay granted"
    }

    /// CPU (µs) of relay 1 per copy to one local listener, per copy on its trunk to relay 2, and relay 2's per
    /// trunk frame it received and fanned out to one listener.
    private static func copyCost(
        fleet: FleetOfRelays, names: [String], phone: (String, String, Int) async throws -> HopPhone
    ) async throws -> (local: Double, trunk: Double, receiving: Double) {
        let pids = fleet.relays.map(\.processIdentifier)
        func idleRates() async throws -> [Double] {
            let before = pids.map { CPUTime.process($0) }
            let clock = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))
            let seconds = (ContinuousClock.now - clock).seconds
            return zip(pids, before).map { (CPUTime.process($0) - $1) / seconds }
        }
        func burstCPU(talker: HopPhone) async throws -> [Double] {
            let idle = try await idleRates()
            let before = pids.map { CPUTime.process($0) }
            let clock = ContinuousClock.now
            guard try await talker.takeFloor() != nil else { throw BenchError("a CPU talker was not granted") }
            try await talker.talk(frames: cpuFrames)
            try await Task.sleep(for: .milliseconds(200))
            let seconds = (ContinuousClock.now - clock).seconds
            return pids.indices.map { CPUTime.process(pids[$0]) - before[$0] - idle[$0] * seconds }
        }
        let localGroup = group("local", home: 1, over: names)
        let localTalker = try await phone("cpu-lt", localGroup, 1)
        _ = try await phone("cpu-ll", localGroup, 1)
        let local = try await burstCPU(talker: localTalker)
        let trunkGroup = group("trunk", home: 1, over: names)
        let trunkTalker = try await phone("cpu-tt", trunkGroup, 1)
        _ = try await phone("cpu-tl", trunkGroup, 2)
        let trunk = try await burstCPU(talker: trunkTalker)
        let frames = Double(cpuFrames)
        return (local[1] / frames * 1e6, trunk[1] / frames * 1e6, trunk[2] / frames * 1e6)
    }

    /// Rounds of three simultaneous requests (one per relay) until `contestedRequests` or the budget: each phone
    /// granted checks nobody holds the floor, holds it briefly and gives it back.
    private static func contest(
        _ talkers: [HopPhone], requests: Int
    ) async throws -> (requests: Int, grants: Int, doubles: Int) {
        let holder = Locked<String?>(nil)
        let counts = Locked((requests: 0, grants: 0, doubles: 0))
        let started = ContinuousClock.now
        while counts.withLock({ $0.requests }) < requests, ContinuousClock.now - started < contestedBudget {
            await withTaskGroup(of: Void.self) { round in
                for talker in talkers {
                    round.addTask {
                        counts.withLock { $0.requests += 1 }
                        guard (try? await talker.takeFloor(within: .seconds(2))) ?? nil != nil else { return }
                        let double = holder.withLock { current -> Bool in
                            defer { current = talker.user }
                            return current != nil
                        }
                        counts.withLock {
                            $0.grants += 1
                            if double { $0.doubles += 1 }
                        }
                        try? await Task.sleep(for: .milliseconds(1))  // held: a second grant now overlaps
                        holder.withLock { if $0 == talker.user { $0 = nil } }
                        try? await talker.phone.releaseFloor()
                    }
                }
            }
        }
        return counts.withLock { $0 }
    }
}

extension Duration {
    /// In seconds.
    fileprivate var seconds: Double { milliseconds / 1000 }
}

extension Optional {
    /// The value, or `error` thrown.
    fileprivate func orThrow(_ error: @autoclosure () -> any Error) throws -> Wrapped {
        guard let self else { throw error() }
        return self
    }
}
