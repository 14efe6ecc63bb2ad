import CommandLineSupport
import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// `serve --workers N`: the relay's connections in N processes on one host. This process binds the sockets — one
/// SO_REUSEPORT group of N × (event loops) UDP sockets with the kernel's connection-ID steering over all of them,
/// and one TCP listener — and starts each worker (`serve` again, with `--worker-sockets`) on its share; a worker that
/// dies is started again on the same sockets, so the connections of the others never notice, and the clients of
/// the dead one are reset by its successor (shared reset secret) and resume (shared ticket key; 0-RTT with a shared
/// `--anti-replay` store). SIGTERM drains every worker and exits 0 when they have; SIGINT ends everything at once.
enum ServeWorkers {
    static func supervise(
        workers: Int, loopsPerWorker: Int, configuration: ServerConfiguration, arguments: [String],
        admin: SupervisorAdmin? = nil
    ) async throws -> Never {
        guard (2...64).contains(workers) else {
            throw Arguments.Failure(description: "--workers is 2 to 64 processes")
        }
        guard workers * loopsPerWorker <= 256 else {
            throw Arguments.Failure(description: "--workers × --event-loops is at most 256 sockets")
        }
        if let quicLB = configuration.quicLB, quicLB.key != nil {
            throw Arguments.Failure(
                description: "--workers needs the kernel to steer by connection ID: use a QUIC-LB configuration "
                    + "without a key (an encrypted ID cannot be read by the kernel)")
        }
        let (udp, tcp) = try bindSockets(configuration, count: workers * loopsPerWorker)
        var secrets: [String] = []
        let scratch = try privateSecrets(for: arguments, into: &secrets)
        // Every worker must load the same keys: this process creates the files first.
        var shared = configuration
        for (option, path) in stride(from: 0, to: secrets.count, by: 2).map({ (secrets[$0], secrets[$0 + 1]) }) {
            if option == "--ticket-key" { shared.ticketKeyFile = path } else { shared.statelessResetSecretFile = path }
        }
        try shared.createSecretFiles()
        let relayWide = try RelayWideMemory(workers: workers, configuration: configuration)
        let shares = (0..<workers).map { index in
            InheritedSockets(
                udp: udp.isEmpty ? [] : udp[(index * loopsPerWorker)..<((index + 1) * loopsPerWorker)].map(\.fd),
                tcp: tcp?.fd, firstLoop: index * loopsPerWorker, totalLoops: workers * loopsPerWorker,
                relayWide: relayWide.share(worker: index))
        }
        let address = udp.first?.localAddress.description ?? tcp?.localAddress.description ?? ""
        print("listening on \(address)")
        fflush(nil)
        RelayLog.info(
            "listen",
            [
                "address": address, "workers": workers, "event_loops_each": loopsPerWorker,
                "steering": udp.isEmpty ? "none (TCP only)" : "bpf",
            ])
        let supervisor = Supervisor(
            executable: CommandLine.arguments[0], arguments: arguments + secrets, shares: shares, scratch: scratch,
            keep: (udp, tcp), relayWide: relayWide, admin: admin)
        if let admin {
            print("admin on \(admin.address)")
            fflush(nil)
        }
        GracefulStop.set {
            admin?.draining()  // the balancer sees 503 before any worker asks its clients to move
            supervisor.stop()
        }
        HangupReload.set { supervisor.forward(SIGHUP) }
        await supervisor.run()  // never returns: exits when the workers have drained
    }

    /// In a worker: exits when its parent is gone, checked twice a second — beside the kernel's parent-death
    /// signal, which one test run on this VM saw missed — so no worker outlives the relay holding its sockets and
    /// its parent's output.
    static func exitWhenOrphaned(parent: Int32) {
        Thread {
            while getppid() == parent { usleep(500_000) }
            exit(0)
        }.start()
    }

    /// Binds the group (port 0: one the kernel picks, the TCP listener on the same number) and attaches the
    /// steering program, which must work: without it a worker would get another's packets.
    private static func bindSockets(
        _ configuration: ServerConfiguration, count: Int
    ) throws -> ([UDPSocket], TCPListener?) {
        let udpAddress = try configuration.quic.map(parse)
        let requestedTCP = try configuration.tcp.map(parse)
        // Port 0 on both: TCP takes the port the kernel chose for UDP, which another program may hold for TCP;
        // then the group tries another port (a few times) rather than fail.
        let samePort = requestedTCP.map { $0.port == 0 && $0 == udpAddress } ?? false
        var attempt = 0
        var udp: [UDPSocket] = []
        var tcp: TCPListener?
        while true {
            attempt += 1
            udp = try udpAddress.map { try ReuseportGroup.bind($0, count: count) } ?? []
            var tcpAddress = requestedTCP
            if samePort, let first = udp.first, let requested = requestedTCP {
                tcpAddress = requested.with(port: first.localAddress.port)
            }
            do {
                tcp = try tcpAddress.map { try TCPListener(bindingTo: $0) }
                break
            } catch {
                for socket in udp { socket.close() }
                if samePort && attempt < 20 { continue }
                throw error
            }
        }
        if !udp.isEmpty, ReuseportGroup.steer(udp, quicLB: configuration.quicLB) != .kernelProgram {
            throw Arguments.Failure(
                description: "--workers needs the kernel's connection-ID steering (SO_ATTACH_REUSEPORT_CBPF), "
                    + "which this kernel refused or misroutes; run one process with --event-loops instead")
        }
        return (udp, tcp)
    }

    private static func parse(_ text: String) throws -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw Arguments.Failure(description: "cannot parse the listening address \(text); use HOST:PORT")
        }
        return address
    }

    /// Every worker must hold the same ticket key and reset secret: files the user did not name are made in a
    /// private scratch directory (removed at exit) and passed on.
    private static func privateSecrets(for arguments: [String], into extra: inout [String]) throws -> URL? {
        let missing = ["--ticket-key", "--reset-secret"].filter { !arguments.contains($0) }
        guard !missing.isEmpty else { return nil }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-workers-\(getpid())")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for option in missing { extra += [option, directory.appendingPathComponent(option.dropFirst(2) + "").path] }
        return directory
    }
}

/// Starts the workers, restarts one that dies, and on `stop()` drains them all. Its thread spawns and reaps every
/// worker (a worker's parent-death signal follows the thread that started it, so it is one long-lived thread).
private final class Supervisor: @unchecked Sendable {
    // @unchecked Sendable invariant: `pids` and `stopping` are guarded by `lock`; the rest is immutable.
    private let executable: String
    private let arguments: [String]
    private let shares: [InheritedSockets]
    private let scratch: URL?
    /// The parent's sockets stay open for the workers' whole life (a restarted worker gets the same ones).
    private let keep: ([UDPSocket], TCPListener?)
    private let lock = NSLock()
    private var pids: [Int32: Int] = [:]
    private var stopping = false
    /// Per worker: when it last started, and the pause before restarting it (doubling while it dies young).
    private var started: [Int: (at: ContinuousClock.Instant, pause: Duration)] = [:]
    /// What the workers count together; a dead worker's holdings are given back before it starts again.
    private let relayWide: RelayWideMemory
    /// The host's admin endpoint: each worker serves its own on loopback and writes where to its file.
    private let admin: SupervisorAdmin?

    init(
        executable: String, arguments: [String], shares: [InheritedSockets], scratch: URL?,
        keep: ([UDPSocket], TCPListener?), relayWide: RelayWideMemory, admin: SupervisorAdmin?
    ) {
        self.admin = admin
        self.executable = executable
        self.arguments = arguments
        self.shares = shares
        self.scratch = scratch
        self.keep = keep
        self.relayWide = relayWide
    }

    func run() async -> Never {
        let thread = Thread { [self] in supervise() }
        thread.start()
        while true { try? await Task.sleep(for: .seconds(3600)) }
    }

    private func supervise() {
        for index in shares.indices {
            lock.withLock { started[index] = (.now, .zero) }
            start(index)
        }
        while let (pid, ending) = WorkerProcesses.waitForAnyChild() {
            let (index, restart) = lock.withLock { () -> (Int?, Bool) in (pids.removeValue(forKey: pid), !stopping) }
            guard let index else { continue }
            relayWide.state.releaseWorker(index)  // its connections' slots and pending handshakes come back now
            if restart {
                let pause = lock.withLock { () -> Duration in
                    // A worker that dies young (a bad argument, a crash at start) waits longer each time, to 5 s.
                    let last = started[index] ?? (.now, .zero)
                    return ContinuousClock.now - last.at < .seconds(1)
                        ? min(max(last.pause * 2, .milliseconds(100)), .seconds(5)) : .milliseconds(100)
                }
                RelayLog.warning(
                    "worker_restart",
                    ["worker": index, "pid": Int(pid), "ended": "\(ending)", "restart_in": "\(pause)"])
                Thread.sleep(
                    forTimeInterval: Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18)
                lock.withLock { started[index] = (.now, pause) }
                start(index)
            } else if lock.withLock({ pids.isEmpty }) {
                finish()
            }
        }
        finish()
    }

    private func start(_ index: Int) {
        let share = shares[index]
        // The worker finds its sockets as descriptors 3, 4, ...: the UDP ones in loop order, then the listener,
        // then the relay-wide memory.
        let descriptors = share.udp + (share.tcp.map { [$0] } ?? []) + (share.relayWide.map { [$0.descriptor] } ?? [])
        let inChild = InheritedSockets(
            udp: share.udp.indices.map { Int32(3 + $0) }, tcp: share.tcp.map { _ in Int32(3 + share.udp.count) },
            firstLoop: share.firstLoop, totalLoops: share.totalLoops,
            relayWide: share.relayWide.map { .init(descriptor: Int32(3 + descriptors.count - 1), worker: $0.worker) })
        // A worker's own admin endpoint: loopback, a port the kernel picks (a later --admin wins over the user's).
        let adminArguments =
            admin.map { ["--admin", "127.0.0.1:0", "--admin-address-file", $0.addressFile(worker: index)] } ?? []
        let argv =
            [executable, "serve"] + arguments + adminArguments
            + ["--worker-sockets", inChild.argument, "--worker-of", "\(getpid())"]
        do {
            let pid = try WorkerProcesses.spawn(executable, argv, descriptors: descriptors)
            lock.withLock { pids[pid] = index }
            RelayLog.info("worker_started", ["worker": index, "pid": Int(pid)])
        } catch {
            RelayLog.error("worker_start_failed", ["worker": index, "error": "\(error)"])
        }
    }

    /// Sends `signal` to every worker (SIGHUP: each reloads its certificate and secrets).
    func forward(_ signal: Int32) {
        for pid in lock.withLock({ Array(pids.keys) }) { kill(pid, signal) }
    }

    /// SIGTERM: every worker drains (its clients move to other relays); this process exits 0 once they have.
    func stop() {
        let running = lock.withLock { () -> [Int32] in
            stopping = true
            return Array(pids.keys)
        }
        if running.isEmpty { finish() }
        for pid in running { kill(pid, SIGTERM) }
    }

    private func finish() -> Never {
        if let scratch { try? FileManager.default.removeItem(at: scratch) }
        admin?.remove()
        fflush(nil)
        exit(0)
    }
}
