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
///
/// SIGUSR2 upgrades in place (`WorkerSupervisor.upgrade`): the group holds two sets of sockets, one per
/// generation of workers; a new generation started from the executable on disk takes the other set, the steering
/// program then sends it every new connection while each established connection's packets keep reaching its own
/// worker by the socket its ID names, and the old generation drains.
enum ServeWorkers {
    static func supervise(
        workers: Int, loopsPerWorker: Int, configuration: ServerConfiguration, arguments: [String],
        admin: SupervisorAdmin? = nil
    ) async throws -> Never {
        // Two generations' slots: twice the workers in the relay-wide memory, twice the sockets in the group.
        guard (2...32).contains(workers) else {
            throw Arguments.Failure(description: "--workers is 2 to 32 processes")
        }
        let slots = WorkerSlots(workers: workers, loopsPerWorker: loopsPerWorker)
        guard slots.totalSockets <= 256 else {
            throw Arguments.Failure(
                description: "--workers × --event-loops is at most 128 (twice as many sockets: one set per generation)")
        }
        if let quicLB = configuration.quicLB, quicLB.key != nil {
            throw Arguments.Failure(
                description: "--workers needs the kernel to steer by connection ID: use a QUIC-LB configuration "
                    + "without a key (an encrypted ID cannot be read by the kernel)")
        }
        let (udp, tcp) = try bindSockets(configuration, slots: slots)
        var secrets: [String] = []
        let scratch = try privateSecrets(for: arguments, into: &secrets)
        // Every worker must load the same keys: this process creates the files first.
        var shared = configuration
        for (option, path) in stride(from: 0, to: secrets.count, by: 2).map({ (secrets[$0], secrets[$0 + 1]) }) {
            if option == "--ticket-key" { shared.ticketKeyFile = path } else { shared.statelessResetSecretFile = path }
        }
        try shared.createSecretFiles()
        let relayWide = try RelayWideMemory(workers: slots.count, configuration: configuration)
        let shares = (0..<slots.count).map { slot in
            let loops = slots.loops(slot: slot)
            return InheritedSockets(
                udp: udp.isEmpty ? [] : udp[loops].map(\.fd), tcp: tcp?.fd, firstLoop: loops.lowerBound,
                totalLoops: slots.totalSockets, relayWide: relayWide.share(worker: slot))
        }
        let address = udp.first?.localAddress.description ?? tcp?.localAddress.description ?? ""
        print("listening on \(address)")
        fflush(nil)
        RelayLog.info(
            "listen",
            [
                "address": address, "workers": workers, "event_loops_each": loopsPerWorker,
                "steering": udp.isEmpty ? "none (TCP only)" : "bpf", "upgrade_signal": "SIGUSR2",
            ])
        let supervisor = WorkerSupervisor(
            executable: CommandLine.arguments[0], arguments: arguments + secrets, slots: slots, shares: shares,
            scratch: scratch, keep: (udp, tcp), relayWide: relayWide, admin: admin, quicLB: configuration.quicLB)
        if let admin {
            print("admin on \(admin.address)")
            fflush(nil)
        }
        GracefulStop.set {
            admin?.draining()  // the balancer sees 503 before any worker asks its clients to move
            supervisor.stop()
        }
        SignalAction.hangupReload.set { supervisor.forward(SIGHUP) }
        SignalAction.upgrade.set { supervisor.requestUpgrade() }
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

    /// Binds the group — both generations' sets — (port 0: one the kernel picks, the TCP listener on the same
    /// number) and attaches the steering program, new connections to the first set; it must work: without it a
    /// worker would get another's packets.
    private static func bindSockets(
        _ configuration: ServerConfiguration, slots: WorkerSlots
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
            udp = try udpAddress.map { try ReuseportGroup.bind($0, count: slots.totalSockets) } ?? []
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
        if !udp.isEmpty,
            ReuseportGroup.steer(udp, quicLB: configuration.quicLB, newConnections: slots.sockets(set: 0))
                != .kernelProgram
        {
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
