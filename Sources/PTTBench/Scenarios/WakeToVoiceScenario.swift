import ChildProcesses
import Foundation
import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import PushEmulation
import TransportCore
import TransportIO

/// `wake-to-voice`: one talker, N suspended listeners (1, 100, 1,000), each woken by an emulated push (log-normal,
/// mean 800 ms, p95 2 s, seeded) carrying the burst's wake ticket; its 0-RTT first flight joins and asks for the
/// burst, which the relay replays from its first frame. Over QUIC and over TCP, on the emulated path (`--rtt`).
///
/// Per round: frames of the burst each woken listener missed (p50, max); first audio after the listener's network
/// start (ms and RTT); burst start (the floor request) → first audio (p50, p95) beside the push delay; time until
/// the listener hears live audio (a frame within one RTT of its sending), or, woken after the burst ended, until
/// its last frame; the wake hook's hand-off (floor request read → hook called); and, with the listeners then
/// connected, the relay's CPU (its event loops' threads) per buffered frame replayed against per live copy.
enum WakeToVoiceScenario {
    static let frames = 250  // a 5 s burst
    static let cpuFrames = 100

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        CapacityScenarios.raiseFileLimit(to: 8_192)
        var results: [ScenarioResult] = []
        for path in [BenchEnvironment.RelayPaths.quic, .tcp]
        where options.wakeTransports.contains(path == .quic ? "quic" : "tcp") {
            for count in options.wakeListeners {
                for answer in options.wakeFirstFlight where answer == "loop" || options.wakeRelayInProcess {
                    let name =
                        "wake-to-voice-\(path == .quic ? "quic" : "tcp")-\(count)" + (answer == "task" ? "-task" : "")
                    options.progress("\(name): setting up")
                    do {
                        results.append(
                            try await round(
                                name, path: path, listeners: count, answerOnLoop: answer == "loop", options: options,
                                environment: environment))
                    } catch {
                        var row = ScenarioResult(scenario: name, iterations: count)
                        row.note = "could not run: \(error)"
                        results.append(row)
                    }
                }
            }
        }
        return results
    }

    private static func round(
        _ name: String, path: BenchEnvironment.RelayPaths, listeners count: Int, answerOnLoop: Bool,
        options: BenchOptions, environment: BenchEnvironment
    ) async throws -> ScenarioResult {
        let gateway = EmulatedPushGateway(seed: UInt64(count))
        let relay = try await WakeToVoiceRelay.start(
            tcp: path == .tcp, answerOnLoop: answerOnLoop, options: options, environment: environment,
            gateway: gateway)
        let address = relay.address
        let clientConfiguration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority), handshakeTimeout: .seconds(10),
            fallback: path == .quic ? .quicOnly : .tcpOnly)
        // The talker has a loop of its own (a phone of its own), the listeners share two: a thousand listeners'
        // handshakes must not hold up the talker's frames, which no listener could then hear.
        let loops = try (0..<3).map { try environment.makeClientSideLoop(name: "wake-phones-\($0)") }
        defer { for loop in loops { loop.shutdown() } }
        let talkerClient = TransportClient(configuration: clientConfiguration, loop: loops[0])
        let listenerClients = loops.dropFirst().map { TransportClient(configuration: clientConfiguration, loop: $0) }
        let relayAddress = address  // the relay's side of the path; the certificate name is the client's "localhost"
        let rtt = environment.rttMilliseconds ?? 0

        var listeners: [WakeToVoiceListener] = []
        var talkerPhone: TalkGroupPhone?
        // Phones and relay end before the server shuts its loops down.
        func finish() async {
            for listener in listeners { listener.stop() }
            talkerPhone?.stop()
            await relay.stop()
        }
        do {
            // The listeners join once, then suspend (their sessions kept for a 0-RTT wake).
            for start in stride(from: 0, to: count, by: 100) {
                let batch = try (start..<min(count, start + 100)).map {
                    try WakeToVoiceListener(
                        index: $0, group: "dispatch", client: listenerClients[$0 % listenerClients.count],
                        relay: relayAddress)
                }
                listeners += batch
                try await all(batch, within: .seconds(30), "join") { _ = try await $0.phone.link.nextReady() }
            }
            let joined = listeners
            try await all(joined, within: .seconds(60), "suspend") { await $0.phone.suspend() }
            // The relay marks each suspended within a round trip of its close (`hook_members` says it saw them all).
            try await Task.sleep(for: .seconds(1))
            for listener in listeners {
                gateway.register(listener.phone.configuration.user) { ticket in listener.woken(by: ticket) }
            }
            environment.network?.recordTimeline()  // where each wake's first audio went (`WakeToVoiceSplit`)
            let dropsBefore = UDPDrops.read(environment)
            let cpuBefore = CPUTime.process()
            let wallBefore = ContinuousClock.now
            options.progress("\(name): \(count) listeners suspended; talking")

            // The talker: floor request, then a 5 s burst at 20 ms.
            let talker = try TalkGroupPhone(
                client: talkerClient, relay: relayAddress,
                configuration: .init(user: try MemberIdentity("talker"), group: "dispatch"))
            talkerPhone = talker
            _ = try await ReconnectScenario.within(.seconds(10)) { try await talker.link.nextReady() }
            let requested = ContinuousClock.now
            guard case .granted(let burst) = try await talker.requestFloor() else {
                throw BenchError("\(name): the talker was not granted the floor")
            }
            let talkerBefore = await talker.link.connection?.statistics()
            let sent = await send(frames, on: talker)
            let talkerAfter = await talker.link.connection?.statistics()
            try? await talker.releaseFloor()
            // Every listener wakes within the push's tail (a few seconds) and catches up from the retained burst.
            let woken = listeners
            _ = await waitUntil(.seconds(20)) { woken.allSatisfy { $0.distinct(of: burst) >= frames } }

            var result = ScenarioResult(scenario: name, iterations: count)
            let dropsAfter = UDPDrops.read(environment)
            // How busy this process (relay, phones, delay line) was from the floor request to every listener done.
            result.figure("process_cpu_s", CPUTime.process() - cpuBefore)
            result.figure("wall_s", (ContinuousClock.now - wallBefore).milliseconds / 1000)
            result.figure("udp_receive_drops_phones", Double(dropsAfter.phones &- dropsBefore.phones))
            result.figure("udp_receive_drops_relay", Double(dropsAfter.relay &- dropsBefore.relay))
            // Frames the talker's own connection dropped unsent (stale after 100 ms) or lost on the way: no listener
            // can hear those.
            if let talkerBefore, let talkerAfter {
                result.figure(
                    "talker_frames_expired_or_lost",
                    Double(
                        (talkerAfter.datagramsExpired &- talkerBefore.datagramsExpired)
                            &+ (talkerAfter.datagramsLost &- talkerBefore.datagramsLost)))
            }
            if let network = environment.network {
                await split(
                    into: &result, burst: burst, listeners: listeners, timeline: network.recordedTimeline,
                    oneWay: UInt64(rtt * 500_000))
            }
            measure(
                into: &result, burst: burst, requested: requested, sent: sent, listeners: listeners, gateway: gateway,
                rtt: rtt)
            let handOff = Samples(relay.handOffs().map { $0.milliseconds })
            result.figure("hook_requests", Double(gateway.requests.count))
            result.figure("hook_members", Double(gateway.requests.first?.request.members.count ?? 0))
            if let max = handOff.max { result.figure("hook_handoff_max_ms", max) }
            let firstFrame = Samples(relay.firstFrameDelays().map { $0.milliseconds * 1000 })
            if let values = firstFrame.percentiles([50, 95]) {
                result.figure("relay_first_flight_to_catch_up_p50_us", values[0])
                result.figure("relay_first_flight_to_catch_up_p95_us", values[1])
            }
            if let onLoop = relay.catchUpsInFirstFlightTurn() {
                result.figure("catch_ups_in_first_flight_turn", Double(onLoop))
            }
            if let handed = gateway.requests.first?.at {
                result.figure("floor_request_sent_to_hook_ms", (handed - requested).milliseconds)
            }
            // The child's hook: the floor request's packet leaving the path into the relay's namespace → the
            // command's whole JSON line in its file (the spawn, the JSON and the bench's 1 ms polling).
            if let network = environment.network, let seen = relay.hookLinesSeen().first,
                let local = await talker.link.connection?.statistics().localAddress,
                let port = local.split(separator: ":").last.flatMap({ UInt16($0) })
            {
                let reading = (mono: MonotonicClock.now(), now: ContinuousClock.now)
                let asked = WakeToVoiceSplit.monotonic(requested, reading: reading)
                if let arrived = network.recordedTimeline.byClientPort()[port]?
                    .packets(.clientToServer, clientPort: port, since: asked).first?.left
                {
                    let json = WakeToVoiceSplit.monotonic(seen, reading: reading)
                    result.figure("floor_request_at_relay_to_hook_json_ms", (Double(json) - Double(arrived)) / 1e6)
                }
            }
            try await cpuComparison(
                into: &result, talker: talker, listeners: Array(listeners.prefix(100)), all: listeners.count,
                relay: relay)
            result.note =
                "relay: \(relay.kind); phones in this process; push delays log-normal (mean 800 ms, p95 2 s, "
                + "seed \(count)); \(frames)-frame burst"
            await finish()
            return result
        } catch {
            await finish()
            throw error
        }
    }

    /// The split of each woken listener's first audio between the phone, the path and the relay.
    private static func split(
        into result: inout ScenarioResult, burst: UInt64, listeners: [WakeToVoiceListener], timeline: PathTimeline,
        oneWay: UInt64
    ) async {
        let reading = (mono: MonotonicClock.now(), now: ContinuousClock.now)
        var wakes: [WakeToVoiceSplit.Wake] = []
        for listener in listeners {
            guard let start = listener.networkStart.withLock({ $0 }),
                let first = listener.arrivals(of: burst).values.min(),
                let local = await listener.phone.link.connection?.statistics().localAddress,
                let port = local.split(separator: ":").last.flatMap({ UInt16($0) })
            else { continue }
            wakes.append(
                WakeToVoiceSplit.Wake(
                    start: WakeToVoiceSplit.monotonic(start, reading: reading),
                    firstAudio: WakeToVoiceSplit.monotonic(first, reading: reading), port: port))
        }
        WakeToVoiceSplit(wakes, timeline: timeline, oneWay: oneWay).put(into: &result)
    }

    /// Sends `count` frames 20 ms apart; returns each one's send instant.
    private static func send(_ count: Int, on talker: TalkGroupPhone) async -> [ContinuousClock.Instant] {
        var instants: [ContinuousClock.Instant] = []
        var next = ContinuousClock.now
        let audio = [UInt8](repeating: 0x55, count: 60)
        for index in 0..<count {
            instants.append(.now)
            try? talker.sendAudio(audio, last: index == count - 1)
            next = next.advanced(by: .milliseconds(20))
            try? await Task.sleep(until: next)
        }
        return instants
    }

    private static func measure(
        into result: inout ScenarioResult, burst: UInt64, requested: ContinuousClock.Instant,
        sent: [ContinuousClock.Instant], listeners: [WakeToVoiceListener], gateway: EmulatedPushGateway, rtt: Double
    ) {
        var missed = Samples()
        var firstAfterStart = Samples()
        var burstToFirst = Samples()
        var untilLive = Samples()
        var untilDone = Samples()
        var phoneShare = Samples()
        var accepted = 0
        var woken = 0
        for listener in listeners {
            let arrivals = listener.arrivals(of: burst)
            missed.append(Double(frames - arrivals.count))
            if ProcessInfo.processInfo.environment["PTT_WAKE_DEBUG"] != nil, arrivals.count < frames {
                let gone = (0..<UInt32(frames)).filter { arrivals[$0] == nil }
                FileHandle.standardError.write(Data("missing \(gone)\n".utf8))
            }
            guard let start = listener.networkStart.withLock({ $0 }), let first = arrivals.values.min() else {
                continue
            }
            woken += 1
            if listener.phone.link.connection?.resumption == .resumed(earlyData: .accepted) { accepted += 1 }
            firstAfterStart.append((first - start).milliseconds)
            if let share = listener.phoneShareOfFirstAudio(of: burst) { phoneShare.append(share.milliseconds * 1000) }
            burstToFirst.append((first - requested).milliseconds)
            // Live: the first frame heard within 1.5 RTT of its sending (talker → relay → listener crosses the path
            // twice: one RTT; a frame from the buffer waited at least the push delay).
            let live = arrivals.filter { sequence, at in
                Int(sequence) < sent.count && (at - sent[Int(sequence)]).milliseconds <= max(1.5 * rtt, 20)
            }.values.min()
            if let live {
                untilLive.append((live - start).milliseconds)
            } else if let last = arrivals.values.max() {
                untilDone.append((last - start).milliseconds)
            }
        }
        let delays = Samples(gateway.deliveries.filter { $0.burst == burst }.map { $0.delay.milliseconds })
        result.figure("listeners_woken", Double(woken))
        result.figure("early_data_accepted", Double(accepted))
        put(&result, "missed_frames", missed, [50, 100], names: ["p50", "max"])
        put(
            &result, "first_audio_after_network_start_ms", firstAfterStart, [50, 95, 100], names: ["p50", "p95", "max"])
        if rtt > 0 {
            put(
                &result, "first_audio_after_network_start_rtt", Samples(firstAfterStart.values.map { $0 / rtt }),
                [50, 100], names: ["p50", "max"])
        }
        put(&result, "burst_start_to_first_audio_ms", burstToFirst, [50, 95], names: ["p50", "p95"])
        // The phone's own share of first audio: its first datagram of the burst read by the talk-group phone → the
        // app's first frame (the hop to the app and the catch-up ordering; the loop's read before it is not counted).
        put(&result, "phone_first_datagram_to_app_us", phoneShare, [50, 95, 100], names: ["p50", "p95", "max"])
        if let share = phoneShare.percentile(50), let first = firstAfterStart.percentile(50), first > 0 {
            result.figure("phone_share_of_first_audio_p50", share / 1000 / first)
        }
        put(&result, "push_delay_ms", delays, [50, 95], names: ["p50", "p95"])
        if let p95 = delays.percentile(95) {
            result.figure("target_burst_start_to_first_audio_p95_ms", p95 + 1.1 * rtt)
        }
        result.figure("listeners_live_before_burst_end", Double(untilLive.count))
        put(&result, "network_start_to_live_ms", untilLive, [50, 95], names: ["p50", "p95"])
        put(&result, "network_start_to_last_frame_ms", untilDone, [50, 95], names: ["p50", "p95"])
    }

    private static func put(
        _ result: inout ScenarioResult, _ name: String, _ samples: Samples, _ ps: [Double], names: [String]
    ) {
        guard let values = samples.percentiles(ps) else { return }
        for (value, suffix) in zip(values, names) { result.figure("\(name)_\(suffix)", value) }
    }

    /// With the listeners connected: a second burst heard live, then replayed to up to 100 of them from the
    /// buffer; the relay loops' CPU per live copy and per replayed frame.
    private static func cpuComparison(
        into result: inout ScenarioResult, talker: TalkGroupPhone, listeners: [WakeToVoiceListener], all: Int,
        relay: WakeToVoiceRelay
    ) async throws {
        func relayCPU() -> UInt64 { UInt64(relay.cpuSeconds() * 1e9) }
        try? await Task.sleep(for: .milliseconds(500))  // the wake's handshakes and catch-ups settle
        guard case .granted(let burst) = try await talker.requestFloor() else { return }
        let liveStart = relayCPU()
        _ = await send(cpuFrames, on: talker)
        _ = await waitUntil(.seconds(10)) { listeners.allSatisfy { $0.count(of: burst) >= cpuFrames } }
        let liveCPU = relayCPU() - liveStart
        try? await talker.releaseFloor()
        try? await Task.sleep(for: .milliseconds(300))
        let ticket = WakeTicket(
            group: "dispatch", burst: burst, relay: RelayIdentity(serverName: "localhost", port: relay.address.port))
        let heardLive = listeners.map { $0.count(of: burst) }
        let replayStart = relayCPU()
        for listener in listeners { Task { try? await listener.phone.wake(ticket: ticket) } }
        let replayed = await waitUntil(.seconds(20)) {
            zip(listeners, heardLive).allSatisfy { $0.count(of: burst) >= $1 + cpuFrames }
        }
        let replayCPU = relayCPU() - replayStart
        let perCopy = Double(liveCPU) / 1000 / Double(cpuFrames * all)
        let perReplayed = Double(replayCPU) / 1000 / Double(cpuFrames * listeners.count)
        result.figure("live_cpu_us_per_copy", perCopy)
        result.figure("catch_up_cpu_us_per_frame", perReplayed)
        result.figure("catch_up_over_live_cpu", perReplayed / perCopy)
        if !replayed { result.figure("catch_up_cpu_incomplete", 1) }
    }

    /// Runs `body` for each of `items` at once; throws when one has not finished within `limit`.
    private static func all<Item: Sendable>(
        _ items: [Item], within limit: Duration, _ what: String, _ body: @escaping @Sendable (Item) async throws -> Void
    ) async throws {
        let done = await firstResult(within: limit) { () async -> Bool? in
            await withTaskGroup(of: Void.self) { group in
                for item in items { group.addTask { try? await body(item) } }
            }
            return true
        }
        guard done == true else { throw BenchError("wake-to-voice: \(what) did not finish within \(limit)") }
    }

    private static func waitUntil(_ limit: Duration, _ condition: @escaping @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }
}

/// Datagrams the kernel dropped on each side of the emulated path — for lack of receive-buffer room
/// (`/proc/net/snmp`, Udp RcvbufErrors) or on an interface (`/proc/net/dev`, receive and transmit drops: the TUN
/// device's queue overflowing when the delay line falls behind) — in each namespace (on loopback both read the
/// host's): frames lost before any code of ours saw them, when this process's threads fall behind.
enum UDPDrops {
    static func read(_ environment: BenchEnvironment) -> (phones: UInt64, relay: UInt64) {
        guard let network = environment.network else {
            let count = count()
            return (count, count)
        }
        let phones = (try? network.withNamespace(.client) { Self.count() }) ?? 0
        let relay = (try? network.withNamespace(.server) { Self.count() }) ?? 0
        return (phones, relay)
    }

    private static func count() -> UInt64 { receiveBufferErrors() + interfaceDrops() }

    private static func receiveBufferErrors() -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/net/snmp", encoding: .utf8) else { return 0 }
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("Udp:") }
        guard lines.count >= 2 else { return 0 }
        let names = lines[0].split(separator: " ")
        let values = lines[1].split(separator: " ")
        guard let index = names.firstIndex(of: "RcvbufErrors"), index < values.count else { return 0 }
        return UInt64(values[index]) ?? 0
    }

    /// Receive drops (4th number) and transmit drops (12th) of every interface.
    private static func interfaceDrops() -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/net/dev", encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").dropFirst(2).reduce(0) { total, line in
            let fields = line.split(separator: ":", maxSplits: 1).last?.split(separator: " ") ?? []
            guard fields.count >= 12 else { return total }
            return total + (UInt64(fields[3]) ?? 0) + (UInt64(fields[11]) ?? 0)
        }
    }
}
