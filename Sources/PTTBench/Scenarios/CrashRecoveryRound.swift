import ChildProcesses
import Foundation
import PTTTransport
import TransportCore

/// One round of `crash-recovery`: a child `serve` (with or without `--peer-snapshot`) and listening
/// `TransportLink`s on it; once the snapshot lists every link (with one) and the handshakes settled, the relay
/// is killed with SIGKILL and started again on the same port, and each link's next `.ready` status is timed.
struct CrashRecoveryRound {
    /// Links that listened on the relay.
    var links: Int
    /// SIGKILL sent → the restarted relay's `listening on` line read (`ChildServer.start` returned).
    var restart: Duration
    /// For each link back on a new connection within the bound: the restarted relay listening → the link `.ready`.
    var listeningToReady: [Duration]
    /// How many of those resumed TLS (the relay kept its ticket key).
    var resumed: Int
    /// This process's CPU (all threads) from SIGKILL to the last link ready, or to the bound.
    var clientCPUSeconds: Double

    /// Waiting for the settled state mirrors `CrashRecoveryTests`: the snapshot is rewritten within a second of a
    /// change, and 1.5 s lets the handshake's last packets (ACKs, HANDSHAKE_DONE's) settle, so the links only listen.
    static let settle = Duration.milliseconds(1500)

    /// Runs one round: `links` links, a relay with the snapshot or without (the control), the links' recovery
    /// awaited at most `bound` after the restarted relay listens.
    static func run(
        snapshot: Bool, links count: Int, bound: Duration, executable: String, options: BenchOptions,
        environment: BenchEnvironment
    ) async throws -> CrashRecoveryRound {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-bench-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let snapshotFile = snapshot ? directory.appendingPathComponent("peers").path : nil
        func serve(_ port: UInt16) async throws -> ChildServer {
            var arguments = [
                "serve", "--listen", "\(environment.serverHost):\(port)", "--cert", options.certificate,
                "--key", options.privateKey, "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--reset-secret", directory.appendingPathComponent("reset.key").path,
            ]
            if let snapshotFile { arguments += ["--peer-snapshot", snapshotFile] }
            let (command, all) = environment.serverSideCommand(executable, arguments)
            return try await ChildServer.start(command, all)
        }
        let (port, relay) = try await StablePort.first { port in (port, try await serve(port)) }
        let client = environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority),
                handshakeTimeout: .seconds(5), fallback: .quicOnly))
        let address = ServerAddress(host: environment.serverHost, port: port)
        let links = (0..<count).map { _ in TransportLink(client: client, to: address) }
        defer { for link in links { link.stop() } }
        var localPorts: Set<UInt16> = []
        for link in links {
            guard let ready = await firstResult(within: .seconds(10), { try? await link.nextReady() }) else {
                throw BenchError("crash-recovery: a link did not connect to the child relay within 10 s")
            }
            localPorts.insert(SocketAddress(parsing: await ready.statistics().localAddress)?.port ?? 0)
        }
        if let snapshotFile { try await waitUntilListed(localPorts, in: snapshotFile) }
        try await Task.sleep(for: settle)

        let watchers = links.map(Self.nextReadyAfterLeaving)
        let cpuBefore = CPUTime.process()
        let killed = ContinuousClock.now
        await onThread { relay.kill() }
        let restarted = try await serve(port)
        let listening = ContinuousClock.now
        // At the bound, stopping the links ends the watchers still waiting (`.stopped` is the last status).
        let deadline = Task {
            try await Task.sleep(until: listening + bound)
            for link in links { link.stop() }
        }
        var readyAt: [(at: ContinuousClock.Instant, resumed: Bool)?] = []
        for watcher in watchers { readyAt.append(await watcher.value) }
        let cpu = CPUTime.process() - cpuBefore
        deadline.cancel()
        for link in links { link.stop() }
        let recovered = readyAt.compactMap { $0 }.filter { $0.at - listening <= bound }
        await restarted.stop()
        return CrashRecoveryRound(
            links: count, restart: listening - killed, listeningToReady: recovered.map { $0.at - listening },
            resumed: recovered.filter(\.resumed).count, clientCPUSeconds: cpu)
    }

    /// A task that returns when `link` is `.ready` again after having left `.ready` (a new connection), and whether
    /// that connection resumed; nil when the link stopped first. It subscribes before returning, so no status
    /// published after this call is missed.
    private static func nextReadyAfterLeaving(
        _ link: TransportLink
    ) -> Task<(at: ContinuousClock.Instant, resumed: Bool)?, Never> {
        var updates = link.statusUpdates.makeAsyncIterator()
        return Task {
            var left = false
            while let status = await updates.next() {
                if status != .ready {
                    left = true
                } else if left {
                    return (.now, link.connection.map { $0.resumption != .none } ?? false)
                }
            }
            return nil
        }
    }

    /// Waits (at most 10 s) until the relay's peer snapshot lists a peer at each of `ports`.
    private static func waitUntilListed(_ ports: Set<UInt16>, in file: String) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while clock.now < deadline {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            let listed = Set(((try? PeerSnapshot(decoding: text))?.peers ?? []).map(\.remote.port))
            if ports.isSubset(of: listed) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchError("crash-recovery: the relay's peer snapshot did not list every link within 10 s")
    }
}
