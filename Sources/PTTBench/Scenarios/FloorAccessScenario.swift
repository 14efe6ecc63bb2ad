import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import PushEmulation
import TransportCore
import TransportIO

/// `floor-access`: MCPTT KPI 1 (floor request → floor granted) on the emulated path (`--rtt`, `--loss`), over QUIC
/// and over TCP, against an in-process `TalkGroupRelay`; and the emergency pre-emption time.
///
/// Per round (`--iterations`, at most 50): an awake talker asks for the idle floor (request → granted); a suspended
/// talker's key press wakes it with the floor request in the 0-RTT first flight (key press → granted, the wake's
/// handshake included; the grant comes at 0.5-RTT when the relay accepts the ticket); then, while a third member talks and a listener hears it, a fourth asks with an emergency
/// request (request → granted, in ms and in RTT) and the listener counts the old holder's frames it hears after that
/// grant. KPI 1 is reported over the awake and the waking requests together, and for each kind.
enum FloorAccessScenario {
    static let name = "floor-access"

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        var results: [ScenarioResult] = []
        for path in [BenchEnvironment.RelayPaths.quic, .tcp] {
            let row = "\(name)-\(path == .quic ? "quic" : "tcp")"
            options.progress("\(row): setting up")
            do {
                results.append(try await round(row, path: path, options: options, environment: environment))
            } catch {
                var result = ScenarioResult(scenario: row, iterations: 0)
                result.note = "could not run: \(error)"
                results.append(result)
            }
        }
        return results
    }

    private static func round(
        _ name: String, path: BenchEnvironment.RelayPaths, options: BenchOptions, environment: BenchEnvironment
    ) async throws -> ScenarioResult {
        let rounds = max(1, min(options.iterations, 50))
        var inProcess = options
        inProcess.wakeRelayInProcess = true
        let relay = try await WakeToVoiceRelay.start(
            tcp: path == .tcp, options: inProcess, environment: environment, gateway: EmulatedPushGateway(seed: 1))
        let loop = try environment.makeClientSideLoop(name: "floor-phones")
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority), handshakeTimeout: .seconds(10),
                fallback: path == .quic ? .quicOnly : .tcpOnly),
            loop: loop)
        var phones: [FloorPhone] = []
        func finish() async {
            for phone in phones { phone.phone.stop() }
            await relay.stop()
            loop.shutdown()
        }
        do {
            phones = try ["awake", "waking", "holder", "emergency", "listener"].map {
                try FloorPhone(user: $0, client: client, relay: relay.address)
            }
            for phone in phones { _ = try await ReconnectScenario.within(.seconds(20)) { try await phone.ready() } }
            let (awake, waking, holder, emergency, listener) = (phones[0], phones[1], phones[2], phones[3], phones[4])
            let rtt = environment.rttMilliseconds ?? 0
            let cpuBefore = CPUTime.process()
            let wallBefore = ContinuousClock.now
            var awakeGrant = Samples()
            var wakeGrant = Samples()
            var emergencyGrant = Samples()
            var overlap = Samples()
            var earlyData = 0
            var notGranted = 0
            for index in 0..<rounds {
                options.progress("\(name): round \(index + 1) of \(rounds)")
                if let (grant, burst) = try await awake.timedGrant() {
                    awakeGrant.append(grant)
                    try await awake.release(burst, heardBy: listener)
                } else {
                    notGranted += 1
                }

                await waking.phone.suspend()
                let (grant, accepted) = try await waking.timedWakeAndGrant()
                if accepted { earlyData += 1 }
                if let (grant, burst) = grant {
                    wakeGrant.append(grant)
                    try await waking.release(burst, heardBy: listener)
                } else {
                    notGranted += 1
                }

                guard let (grant, heardAfter, burst) = try await preempt(holder, by: emergency, heardBy: listener)
                else {
                    notGranted += 1
                    continue
                }
                emergencyGrant.append(grant)
                overlap.append(Double(heardAfter))
                try await emergency.release(burst, heardBy: listener)
            }
            var result = ScenarioResult(scenario: name, iterations: rounds)
            result.figure("process_cpu_s", CPUTime.process() - cpuBefore)
            result.figure("wall_s", (ContinuousClock.now - wallBefore).milliseconds / 1000)
            let all = Samples(awakeGrant.values + wakeGrant.values)
            put(&result, "request_to_grant_ms", all, rtt: rtt)
            put(&result, "awake_request_to_grant_ms", awakeGrant, rtt: rtt)
            put(&result, "wake_to_grant_ms", wakeGrant, rtt: rtt)
            result.figure("wakes_in_0rtt", Double(earlyData))
            put(&result, "emergency_request_to_grant_ms", emergencyGrant, rtt: rtt)
            if let values = overlap.percentiles([50, 100]) {
                result.figure("old_holder_frames_after_grant_p50", values[0])
                result.figure("old_holder_frames_after_grant_max", values[1])
            }
            result.figure("requests_not_granted", Double(notGranted))
            result.note =
                "relay in process; phones on one loop; loss \(options.loss); target KPI 1 p95 <= 300 ms at 100 ms "
                + "RTT and 2 % loss; emergency grant <= 1 RTT + 1 frame"
            await finish()
            return result
        } catch {
            await finish()
            throw error
        }
    }

    /// `holder` talks (a frame every 20 ms) until `listener` heard 5 of its frames; `emergency` then asks with an
    /// emergency request. Returns request → granted (ms) and the holder's frames the listener heard after it, or
    /// nil when a request was not granted.
    private static func preempt(
        _ holder: FloorPhone, by emergency: FloorPhone, heardBy listener: FloorPhone
    ) async throws -> (Double, Int, UInt64)? {
        guard case .granted(let burst) = try await holder.phone.requestFloor() else { return nil }
        let talking = Task {
            let audio = [UInt8](repeating: 0x55, count: 60)
            var next = ContinuousClock.now
            while !Task.isCancelled, (try? holder.phone.sendAudio(audio)) != nil {
                next = next.advanced(by: .milliseconds(20))
                try? await Task.sleep(until: next)
            }
        }
        defer { talking.cancel() }
        guard await listener.waitUntil(.seconds(10), { $0.frames(of: burst) >= 5 }) else { return nil }
        let requested = ContinuousClock.now
        guard case .granted(let urgent) = try await emergency.phone.requestFloor(emergency: true) else { return nil }
        let granted = ContinuousClock.now
        // The old holder learns it lost the floor (its sends then fail); frames still in flight arrive meanwhile.
        _ = await listener.waitUntil(.seconds(10)) { $0.released(burst) }
        _ = await talking.value
        try? await Task.sleep(for: .milliseconds(200))
        return ((granted - requested).milliseconds, listener.frames(of: burst, after: granted), urgent)
    }

    private static func put(_ result: inout ScenarioResult, _ name: String, _ samples: Samples, rtt: Double) {
        guard let values = samples.percentiles([50, 95, 100]) else { return }
        let base = name.replacingOccurrences(of: "_ms", with: "")
        for (value, suffix) in zip(values, ["p50", "p95", "max"]) {
            result.figure("\(base)_\(suffix)_ms", value)
            if rtt > 0 { result.figure("\(base)_\(suffix)_rtt", value / rtt) }
        }
    }
}

/// A talk-group phone of `floor-access` with what it heard: its events and the frames of each burst, timed.
final class FloorPhone: Sendable {
    struct Heard {
        var frames: [(burst: UInt64, at: ContinuousClock.Instant)] = []
        var released: Set<UInt64> = []
    }

    let phone: TalkGroupPhone
    private let heard = Locked(Heard())
    private let readers: [Task<Void, Never>]

    init(user: String, client: TransportClient, relay: ServerAddress) throws {
        phone = try TalkGroupPhone(
            client: client, relay: relay, configuration: .init(user: try MemberIdentity(user), group: "dispatch"))
        let (phone, heard) = (phone, heard)
        readers = [
            Task {
                for await frame in phone.frames {
                    heard.withLock { $0.frames.append((frame.header.burst, frame.receivedAt)) }
                }
            },
            Task {
                for await event in phone.events {
                    if case .released(let burst, _, _) = event { heard.withLock { _ = $0.released.insert(burst) } }
                }
            },
        ]
    }

    deinit { for reader in readers { reader.cancel() } }

    /// Connected and joined.
    func ready() async throws { _ = try await phone.link.nextReady() }

    func frames(of burst: UInt64) -> Int { heard.withLock { $0.frames.filter { $0.burst == burst }.count } }

    func frames(of burst: UInt64, after instant: ContinuousClock.Instant) -> Int {
        heard.withLock { $0.frames.filter { $0.burst == burst && $0.at > instant }.count }
    }

    func released(_ burst: UInt64) -> Bool { heard.withLock { $0.released.contains(burst) } }

    /// Request → granted (ms) and the burst, for an awake phone; nil when not granted.
    func timedGrant() async throws -> (Double, UInt64)? {
        let requested = ContinuousClock.now
        guard case .granted(let burst) = try await phone.requestFloor() else { return nil }
        return ((ContinuousClock.now - requested).milliseconds, burst)
    }

    /// A suspended phone's talker presses the key: the phone wakes with the floor request in its 0-RTT first flight
    /// (`requestFloor` on a suspended phone). Returns key press → granted (ms) and the burst (nil when not granted),
    /// and whether the wake went 0-RTT.
    func timedWakeAndGrant() async throws -> ((Double, UInt64)?, Bool) {
        let started = ContinuousClock.now
        guard case .granted(let burst) = try await phone.requestFloor() else { return (nil, false) }
        let granted = ContinuousClock.now
        let early = phone.link.connection?.resumption == .resumed(earlyData: .accepted)
        return (((granted - started).milliseconds, burst), early)
    }

    /// Gives the floor of `burst` back and waits until `listener` heard the release (the floor is idle for the next
    /// request).
    func release(_ burst: UInt64, heardBy listener: FloorPhone) async throws {
        try await phone.releaseFloor()
        _ = await listener.waitUntil(.seconds(10)) { $0.released(burst) }
    }

    /// Polls `condition` every 5 ms until it holds or `limit` passed.
    func waitUntil(_ limit: Duration, _ condition: @Sendable (FloorPhone) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            if condition(self) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition(self)
    }
}
