import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import PushEmulation
import TransportCore
import TransportIO

/// `wake-to-voice`'s relay: a child `ptt-transport serve --talk-groups --wake-exec 'cat >> FILE'` in the relay's
/// namespace, as an operator runs it, whose hook's JSON lines this process reads and hands to the emulated push
/// gateway; or, without the executable (a test process), a `TalkGroupRelay` in this process with the gateway as its
/// `WakeSender`.
struct WakeToVoiceRelay {
    let address: ServerAddress
    /// The relay's CPU so far (seconds): the child's, or this process's relay loops'.
    let cpuSeconds: @Sendable () -> Double
    /// The wake hook's hand-off latencies the relay measured (in this process only).
    let handOffs: @Sendable () -> [Duration]
    /// When this process saw each hook command's JSON line (the child's `--wake-exec` only; its 1 ms polling
    /// included).
    let hookLinesSeen: @Sendable () -> [ContinuousClock.Instant]
    /// Per 0.5-RTT catch-up: first flight in → first replayed frame queued (in this process only).
    let firstFrameDelays: @Sendable () -> [Duration]
    /// Catch-ups started in the loop turn that read the listener's first flight (in this process only).
    let catchUpsInFirstFlightTurn: @Sendable () -> UInt64?
    let stop: @Sendable () async -> Void
    let kind: String

    static func start(
        tcp: Bool, answerOnLoop: Bool = true, options: BenchOptions, environment: BenchEnvironment,
        gateway: EmulatedPushGateway
    ) async throws -> WakeToVoiceRelay {
        if let executable = options.relayExecutable, !options.wakeRelayInProcess {
            return try await child(executable, tcp: tcp, options: options, environment: environment, gateway: gateway)
        }
        var configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey)
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        configuration.maxConnections = 10_000
        let (server, address, _) = try await environment.startRelay(
            configuration, behaviour: .none, paths: tcp ? .tcp : .quic)
        var relayConfiguration = TalkGroupRelay.Configuration(
            identity: RelayIdentity(serverName: "localhost", port: address.port))
        relayConfiguration.maximumMembersPerGroup = 10_000
        // `loop`: an immediate check, so first flights are answered in the loop turn; `task`: one that may wait.
        let relay =
            answerOnLoop
            ? TalkGroupRelay(
                server: server, configuration: relayConfiguration, immediateAuthenticator: { _ in true },
                wakeSender: gateway)
            : TalkGroupRelay(
                server: server, configuration: relayConfiguration, authenticator: { _ in true }, wakeSender: gateway)
        let running = Task { await relay.run() }
        return WakeToVoiceRelay(
            address: address,
            cpuSeconds: { Double(server.loops.reduce(0) { $0 + ($1.threadCPUNanoseconds ?? 0) }) / 1e9 },
            handOffs: { relay.wakeStatistics.handOffLatencies }, hookLinesSeen: { [] },
            firstFrameDelays: { relay.channel(of: "dispatch")?.catchUpStatistics.firstFrameDelays ?? [] },
            catchUpsInFirstFlightTurn: {
                relay.channel(of: "dispatch")?.catchUpStatistics.startedInFirstFlightTurn ?? 0
            },
            stop: {
                running.cancel()
                await server.shutdown()
            }, kind: "in process (its event loops' CPU)")
    }

    private static func child(
        _ executable: String, tcp: Bool, options: BenchOptions, environment: BenchEnvironment,
        gateway: EmulatedPushGateway
    ) async throws -> WakeToVoiceRelay {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-wake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let hookFile = directory.appendingPathComponent("hook.jsonl").path
        _ = FileManager.default.createFile(atPath: hookFile, contents: nil)
        let listen = "\(environment.serverHost):0"
        let (command, arguments) = environment.serverSideCommand(
            executable,
            ["serve"] + (tcp ? ["--no-udp", "--tcp-listen", listen] : ["--listen", listen]) + [
                "--cert", options.certificate, "--key", options.privateKey, "--no-source-limits",
                "--retry-above", "off", "--max-connections", "10000", "--talk-groups",
                "--wake-exec", "cat >> '\(hookFile)'",
            ])
        let relay = try await ChildServer.start(command, arguments)
        guard let parsed = SocketAddress(parsing: relay.address) else {
            relay.stopNow()
            throw BenchError("wake-to-voice: the relay printed no address (\(relay.address))")
        }
        let seen = Locked<[ContinuousClock.Instant]>([])
        let watcher = Task { await follow(hookFile, gateway: gateway, seen: seen) }
        let pid = relay.processIdentifier
        return WakeToVoiceRelay(
            address: ServerAddress(host: environment.serverHost, port: parsed.port),
            cpuSeconds: { CPUTime.process(pid) }, handOffs: { [] }, hookLinesSeen: { seen.withLock { $0 } },
            firstFrameDelays: { [] },
            catchUpsInFirstFlightTurn: { nil },
            stop: {
                watcher.cancel()
                await relay.stop()
                try? FileManager.default.removeItem(at: directory)
            }, kind: "a child ptt-transport serve --talk-groups --wake-exec (its process CPU)")
    }

    /// Reads the hook's JSON lines as the command appends them (every millisecond) and hands each to the gateway.
    private static func follow(
        _ path: String, gateway: EmulatedPushGateway, seen: Locked<[ContinuousClock.Instant]>
    ) async {
        var offset = 0
        var pending: [UInt8] = []
        while !Task.isCancelled {
            if let data = FileManager.default.contents(atPath: path), data.count > offset {
                let now = ContinuousClock.now
                seen.withLock { $0 += Array(repeating: now, count: data[offset...].count { $0 == 0x0A }) }
                pending += data[offset...]
                offset = data.count
                while let end = pending.firstIndex(of: 0x0A) {
                    let line = Array(pending[..<end])
                    pending.removeFirst(end + 1)
                    if let request = request(line) { try? await gateway.wake(request) }
                }
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// A hook line as the `WakeRequest` it was made from.
    static func request(_ line: [UInt8]) -> WakeRequest? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
            let text = object["ticket"] as? String, let ticket = try? WakeTicket(base64URL: text),
            let talker = (object["talker"] as? String).flatMap({ try? MemberIdentity($0) }),
            let members = object["members"] as? [[String: Any]]
        else { return nil }
        let targets = members.compactMap { member -> WakeTarget? in
            guard let user = (member["user"] as? String).flatMap({ try? MemberIdentity($0) }),
                let token = member["push_token"] as? String,
                let address = try? WakeAddress(platform: .other, token: token)
            else { return nil }
            return WakeTarget(identity: user, address: address)
        }
        return WakeRequest(
            group: ticket.group, burst: ticket.burst, talker: talker, relay: ticket.relay, members: targets)
    }
}
