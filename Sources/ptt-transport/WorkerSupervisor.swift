import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// Starts the workers, restarts one that dies, upgrades them in place on SIGUSR2 and on `stop()` drains them all.
/// Two long-lived threads spawn workers: the reaper (first generation and restarts) and the upgrader (new
/// generations). A worker's parent-death signal follows the thread that started it, so neither thread ever ends.
final class WorkerSupervisor: @unchecked Sendable {
    // @unchecked Sendable invariant: `pids`, `stopping`, `started`, `current`, `pending` and `generation` are
    // guarded by `lock`; the rest is immutable (`upgrades` is thread-safe).
    private let executable: String
    private let arguments: [String]
    private let slots: WorkerSlots
    /// Per slot (`WorkerSlots`): its sockets and its place in the relay-wide memory.
    private let shares: [InheritedSockets]
    private let scratch: URL?
    /// The parent's sockets stay open for the workers' whole life (a restarted worker gets the same ones, and no
    /// socket ever leaves the group, so the index each connection ID steers to never moves).
    private let keep: ([UDPSocket], TCPListener?)
    private let quicLB: QUICLBConfiguration?
    private let lock = NSLock()
    /// Running workers: pid → slot.
    private var pids: [Int32: Int] = [:]
    private var stopping = false
    /// Per slot: when it last started, and the pause before restarting it (doubling while it dies young).
    private var started: [Int: (at: ContinuousClock.Instant, pause: Duration)] = [:]
    /// The set whose workers take new connections, and the set an upgrade is starting (nil: none).
    private var current = 0
    private var pending: Int?
    /// The generation serving now, counted from 1 (logs only).
    private var generation = 1
    /// What the workers count together; a dead worker's holdings are given back before it starts again.
    private let relayWide: RelayWideMemory
    /// The host's admin endpoint: each worker serves its own on loopback and writes where to its file.
    private let admin: SupervisorAdmin?
    /// Signalled by SIGUSR2; the upgrader waits on it.
    private let upgrades = DispatchSemaphore(value: 0)
    /// How long a new generation has to say it serves before the upgrade is given up.
    static let readyWithin = Duration.seconds(30)

    init(
        executable: String, arguments: [String], slots: WorkerSlots, shares: [InheritedSockets], scratch: URL?,
        keep: ([UDPSocket], TCPListener?), relayWide: RelayWideMemory, admin: SupervisorAdmin?,
        quicLB: QUICLBConfiguration?
    ) {
        self.admin = admin
        self.executable = executable
        self.arguments = arguments
        self.slots = slots
        self.shares = shares
        self.scratch = scratch
        self.keep = keep
        self.relayWide = relayWide
        self.quicLB = quicLB
    }

    func run() async -> Never {
        Thread { [self] in supervise() }.start()
        Thread { [self] in
            while true {
                upgrades.wait()
                upgrade()
            }
        }.start()
        while true { try? await Task.sleep(for: .seconds(3600)) }
    }

    /// SIGUSR2: an upgrade as soon as the upgrader is free (signals during one are each handled after it).
    func requestUpgrade() { upgrades.signal() }

    private func supervise() {
        for slot in slots.slots(set: 0) {
            lock.withLock { started[slot] = (.now, .zero) }
            _ = try? start(slot)  // a failure is logged (worker_start_failed)
        }
        while let (pid, ending) = WorkerProcesses.waitForAnyChild() {
            let (slot, restart) = lock.withLock { () -> (Int?, Bool) in
                let slot = pids.removeValue(forKey: pid)
                // Only the serving generation's workers come back: an old one drained, a new one that died before
                // it served fails its upgrade.
                return (slot, slot.map { !stopping && slots.set(of: $0) == current } ?? false)
            }
            guard let slot else { continue }
            admin?.ended(slot: slot)
            relayWide.state.releaseWorker(slot)  // its connections' slots and pending handshakes come back now
            if restart {
                let pause = lock.withLock { () -> Duration in
                    // A worker that dies young (a bad argument, a crash at start) waits longer each time, to 5 s.
                    let last = started[slot] ?? (.now, .zero)
                    return ContinuousClock.now - last.at < .seconds(1)
                        ? min(max(last.pause * 2, .milliseconds(100)), .seconds(5)) : .milliseconds(100)
                }
                RelayLog.warning(
                    "worker_restart",
                    ["worker": slot % slots.workers, "pid": Int(pid), "ended": "\(ending)", "restart_in": "\(pause)"])
                Thread.sleep(
                    forTimeInterval: Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18)
                lock.withLock { started[slot] = (.now, pause) }
                _ = try? start(slot)
            } else if lock.withLock({ stopping && pids.isEmpty }) {
                finish()
            } else {
                RelayLog.info("worker_ended", ["worker": slot % slots.workers, "pid": Int(pid), "ended": "\(ending)"])
            }
        }
        finish()
    }

    /// Starts the worker of `slot`; `ready` is the worker's end of its readiness channel (an upgrade waits on it).
    @discardableResult
    private func start(_ slot: Int, ready: Int32? = nil) throws(TransportError) -> Int32 {
        let share = shares[slot]
        let index = slot % slots.workers
        // The worker finds its sockets as descriptors 3, 4, ...: the UDP ones in loop order, then the listener,
        // then the relay-wide memory, then the readiness channel.
        let descriptors =
            share.udp + (share.tcp.map { [$0] } ?? []) + (share.relayWide.map { [$0.descriptor] } ?? [])
            + (ready.map { [$0] } ?? [])
        let stateDescriptor = Int32(3 + share.udp.count + (share.tcp == nil ? 0 : 1))
        let inChild = InheritedSockets(
            udp: share.udp.indices.map { Int32(3 + $0) }, tcp: share.tcp.map { _ in Int32(3 + share.udp.count) },
            firstLoop: share.firstLoop, totalLoops: share.totalLoops,
            relayWide: share.relayWide.map { .init(descriptor: stateDescriptor, worker: $0.worker) },
            ready: ready.map { _ in Int32(3 + descriptors.count - 1) })
        // A worker's own admin endpoint: loopback, a port the kernel picks (a later --admin wins over the user's).
        // One file a slot: during an upgrade's overlap the host's endpoint asks both generations.
        let adminArguments =
            admin.map { ["--admin", "127.0.0.1:0", "--admin-address-file", $0.addressFile(slot: slot)] } ?? []
        let argv =
            [executable, "serve"] + arguments + adminArguments
            + ["--worker-sockets", inChild.argument, "--worker-of", "\(getpid())"]
        do {
            // Spawned and recorded under the lock: a child that exits at once may be reaped before it is recorded;
            // the reaper then waits on the lock and finds it (recorded after, it would stay in `pids` for good,
            // and every later upgrade would be refused as "still draining").
            let pid = try lock.withLock { () -> Result<Int32, TransportError> in
                Result { () throws(TransportError) -> Int32 in
                    let pid = try WorkerProcesses.spawn(executable, argv, descriptors: descriptors)
                    pids[pid] = slot
                    return pid
                }
            }.get()
            RelayLog.info(
                "worker_started", ["worker": index, "pid": Int(pid), "generation_set": slots.set(of: slot)])
            return pid
        } catch {
            RelayLog.error("worker_start_failed", ["worker": index, "error": "\(error)"])
            throw error
        }
    }

    /// An in-place upgrade: a new generation of workers from the executable on disk, on the other set of sockets;
    /// once every one of them says it serves, the steering program sends new connections to them and the old
    /// generation drains (its clients are asked to move, and reconnect to the new one; their packets until then
    /// still reach the old workers, by the socket their IDs name). A new generation that does not start — a
    /// worker that exits, or one silent for `readyWithin` — is ended and the old one keeps serving; so does an
    /// upgrade asked for while the previous one's old generation still drains 5 s later (their set is the one to
    /// reuse).
    private func upgrade() {
        // The previous upgrade's old generation may be ending (its last worker exited, not reaped yet): a moment.
        let patience = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < patience,
            lock.withLock({ pids.values.contains { slots.set(of: $0) != current } })
        {
            Thread.sleep(forTimeInterval: 0.02)
        }
        let attempt = lock.withLock { () -> Result<(from: Int, to: Int), TransportError> in
            if stopping { return .failure(TransportError(.invalidConfiguration, "the relay is stopping")) }
            if let draining = pids.values.first(where: { slots.set(of: $0) != current }) {
                return .failure(
                    TransportError(
                        .invalidConfiguration,
                        "the previous generation still drains (worker \(draining % slots.workers)); "
                            + "signal again once it has ended"))
            }
            pending = 1 - current
            return .success((current, 1 - current))
        }
        let sets: (from: Int, to: Int)
        switch attempt {
        case .failure(let error):
            RelayLog.error("upgrade_refused", ["error": error.message])
            return
        case .success(let chosen): sets = chosen
        }
        RelayLog.info("upgrade", ["executable": executable, "generation_set": sets.to])
        var channels: [Int32] = []
        defer { for fd in channels { close(fd) } }
        var failure: TransportError?
        for slot in slots.slots(set: sets.to) {
            do throws(TransportError) {
                let (mine, theirs) = try WorkerReadiness.channel()
                channels.append(mine)
                defer { close(theirs) }  // the worker holds its own copy: its exit closes the channel
                lock.withLock { started[slot] = (.now, .zero) }
                try start(slot, ready: theirs)
            } catch {
                failure = error
                break
            }
        }
        if failure == nil {
            let answers = WorkerReadiness.wait(for: channels, within: Self.readyWithin)
            if let (index, answer) = answers.enumerated().first(where: { $0.element != .ready }) {
                failure = TransportError(
                    .invalidConfiguration,
                    "new worker \(index) "
                        + (answer == .ended
                            ? "exited before it served" : "did not serve within \(Self.readyWithin)")
                        + " (\(executable)): run it by hand to see why; the old generation keeps serving")
            }
        }
        let (udp, _) = keep
        if failure == nil, !udp.isEmpty,
            !ReuseportGroup.steerNewConnections(udp, to: slots.sockets(set: sets.to), quicLB: quicLB)
        {
            failure = TransportError(
                .systemCallFailed, "the kernel refused the new steering program; the old generation keeps serving")
        }
        if let failure {
            let started = lock.withLock { () -> [Int32] in
                pending = nil
                return pids.filter { slots.set(of: $0.value) == sets.to }.map(\.key)
            }
            for pid in started { kill(pid, SIGKILL) }
            RelayLog.error("upgrade_failed", ["error": failure.message, "code": "\(failure.code)"])
            return
        }
        let old = lock.withLock { () -> [Int32] in
            current = sets.to
            pending = nil
            generation += 1
            return pids.filter { slots.set(of: $0.value) == sets.from }.map(\.key)
        }
        admin?.serving(set: sets.to)  // readiness follows the new generation; metrics keep the old one's too
        for pid in old { kill(pid, SIGTERM) }  // each drains: its clients move to the new generation
        RelayLog.info(
            "upgraded",
            [
                "generation": lock.withLock { generation }, "generation_set": sets.to,
                "draining_pids": old.map { Int($0) },
            ])
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
