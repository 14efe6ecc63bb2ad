import TransportCore
import TransportIO

/// The loop side of a relay's TCP listener: accepts connections and runs QMux over TLS 1.3 on each, handing
/// each one to the same application handler as QUIC connections once it is ready.
///
/// A server has one per event loop. The first loop's driver holds the listener: it accepts, admits (in the
/// kernel's accept order, so "the oldest pending handshake" keeps its meaning) and deals the connections out
/// to the loops in turn; each loop's driver runs the connections it was dealt.
final class QMuxServerDriver {
    let loop: EventLoop
    /// The listener, on the first loop's driver only.
    let listener: TCPListener?
    /// Whether the listener was closed (by a drain, or at shutdown): it is closed once.
    private var listenerClosed = false
    /// The TLS context of new connections (replaced by `TransportServer.reload`).
    var tls: TLSServerContext
    let configuration: ServerConfiguration
    /// The QUIC endpoint's parameters: QMux advertises the same receive windows and stream limit
    /// (`ServerConfiguration.receiveBudget`), so one TCP connection can make the relay hold no more than a QUIC one.
    let parameters: QUICParameters
    /// This loop's connections, by the number the accepting driver gave them.
    private var drivers: [UInt64: QMuxConnectionDriver] = [:]
    /// Handshakes and ended connections' datagrams, for the relay's metrics.
    private(set) var metrics = RelayLoopMetrics()
    /// While draining: when the relay closes (monotonic).
    private var drainDeadline: UInt64?
    /// This loop's index among the server's loops.
    private let index: Int
    /// Shared by the drivers of every loop: the connections accepted whose handshake has not finished
    /// (per-source budget and overall cap), the live connection count, and the live connections and
    /// new-connection rate per source (`perSourceLimits`, shared in meaning with QUIC: a client refused there must
    /// not get round it by falling back to TCP). A TCP handshake proves the address.
    private let admission: SharedTCPAdmission
    private var charges: [UInt64: SourceLedger.Charge] = [:]
    /// Accepting driver: the number of the last connection accepted, and the loop the next one goes to.
    private var lastSerial: UInt64 = 0
    private var nextLoop = 0
    /// Connections closed at accept because their source held or opened too many (`perSourceLimits`).
    private(set) var refusedOverSourceLimits = 0
    /// Called on the loop for every connection that became ready.
    let accepted: (TransportConnection) -> Void
    /// Accept failures so far (e.g. out of descriptors); the listener keeps going.
    private(set) var acceptFailures = 0
    /// Connections closed at accept because their source was over its pending-handshake budget.
    private(set) var refusedOverSourceBudget = 0
    /// Returns what finished connections freed to the system (`ServerConfiguration.releasesFreedMemory`).
    private let heapRelease: HeapRelease?
    /// Connections reset at accept because the process had only its descriptor reserve left.
    private(set) var refusedForDescriptors = 0
    /// Pending handshakes closed to make room for a newcomer once `maxPendingTCPHandshakes` were pending.
    private(set) var evictedPending = 0
    /// The listener is unwatched for a while after accept failed (see `pauseAccepting`).
    private var acceptPaused = false
    private var listening = true
    private let resumeTimerID: Int
    /// How long accepting pauses after accept failed for lack of descriptors or memory. EMFILE leaves the
    /// connection queued and the listener readable, so retrying at once would spin the loop at full CPU; a pause
    /// this short delays a new client by at most this once descriptors are free again.
    static let acceptPause: UInt64 = 100_000_000

    init(
        loop: EventLoop, listener: TCPListener?, tls: TLSServerContext, configuration: ServerConfiguration,
        index: Int, admission: SharedTCPAdmission, accepted: @escaping (TransportConnection) -> Void
    ) throws(TransportError) {
        self.loop = loop
        self.listener = listener
        self.tls = tls
        self.configuration = configuration
        self.parameters = configuration.quicEndpointParameters
        self.accepted = accepted
        self.index = index
        self.admission = admission
        resumeTimerID = loop.makeTimerID()
        heapRelease = configuration.releasesFreedMemory ? HeapRelease(loop: loop) : nil
        if listener != nil { try watchListener() }
    }

    var connectionCount: Int { drivers.count }

    /// The live connections' datagrams.
    var liveDatagrams: DatagramTotals {
        drivers.values.reduce(into: DatagramTotals()) { $0.add($1.pump.statistics($1)) }
    }
    /// Of those, the ones not closed yet (QUIC's closing period and QMux's last bytes left out).
    var openConnectionCount: Int { drivers.values.openCount() }

    var statistics: TCPAdmissionStatistics {
        var statistics = TCPAdmissionStatistics()
        statistics.pendingHandshakes = admission.pending.withLock { $0.count }
        statistics.refusedOverSourceBudget = refusedOverSourceBudget
        statistics.refusedOverSourceLimits = refusedOverSourceLimits
        statistics.evictedPendingHandshakes = evictedPending
        statistics.refusedForDescriptors = refusedForDescriptors
        statistics.acceptFailures = acceptFailures
        return statistics
    }

    private func watchListener() throws(TransportError) {
        guard let listener else { return }
        try loop.register(fd: listener.fd, events: EventLoop.readable) { [weak self] _ in self?.acceptAll() }
    }

    private func acceptAll() {
        guard let listener else { return }
        for _ in 0..<256 {
            let socket: TCPSocket
            do {
                guard let next = try listener.accept() else { return }
                socket = next
            } catch  where error.code == .connectionRefused {
                refusedForDescriptors += 1  // it would have taken the descriptor reserve: reset; take the next
                continue
            } catch {
                acceptFailures += 1  // e.g. EMFILE: keep serving the connections we have
                pauseAccepting()
                return
            }
            admit(socket)
        }
    }

    /// Stops watching the listener for `acceptPause`, then watches it again (queued connections wait in the
    /// kernel's backlog meanwhile). Established connections are served throughout.
    private func pauseAccepting() {
        guard !acceptPaused else { return }
        acceptPaused = true
        if let listener { loop.unregister(fd: listener.fd) }
        loop.schedule(timer: resumeTimerID, at: MonotonicClock.now() &+ Self.acceptPause) { [weak self] in
            self?.resumeAccepting()
        }
    }

    private func resumeAccepting() {
        guard acceptPaused, listening else { return }
        acceptPaused = false
        do {
            try watchListener()
        } catch {
            pauseAccepting()  // epoll_ctl itself failed (ENOMEM): try again after another pause
            return
        }
        acceptAll()  // level-triggered epoll would report the backlog anyway; take it now
    }

    /// Starts the handshake of a new connection, or refuses it: over `maxConnections`, from a source over its
    /// pending budget, or from a source over `perSourceLimits`. At the pending cap, a pending handshake of the
    /// source holding the most is dropped to make room (`PendingHandshakes`).
    private func admit(_ socket: TCPSocket) {
        let source = PendingHandshakes<SharedTCPAdmission.Key>.Source(socket.remoteAddress)
        // The source's budget over the relay's workers first (always granted outside a worker): a source cannot
        // hold its budget once per worker.
        guard admission.acquirePending(from: source) else {
            refusedOverSourceBudget += 1
            refuse(socket)
            return
        }
        let decision = admission.pending.withLock { $0.admission(for: source) }
        // Evicting a pending one frees a slot.
        let full = admission.load.connections >= configuration.maxConnections
        if decision == .refuse || (full && decision == .admit) {
            if decision == .refuse { refusedOverSourceBudget += 1 }
            admission.releaseAcquired(from: source)
            refuse(socket)
            return
        }
        var charge: SourceLedger.Charge?
        if let ledger = admission.ledger {
            guard
                case .admitted(let admitted) = ledger.admit(
                    socket.remoteAddress, validated: true,
                    now: MonotonicClock.now())
            else {
                refusedOverSourceLimits += 1
                admission.releaseAcquired(from: source)
                refuse(socket)
                return
            }
            charge = admitted
        }
        if case .admitAfterEvicting(let oldest) = decision {
            evictedPending += 1
            admission.removePending(oldest)
            let limit = admission.pending.withLock { $0.limit }
            let error = TransportError(
                .connectionRefused, "dropped during the handshake: the server had \(limit) TCP handshakes pending")
            if oldest.loop == index {
                abortPending(oldest.serial, error)
            } else {
                let owner = admission.drivers[oldest.loop]
                owner.loop.execute { owner.value?.abortPending(oldest.serial, error) }
            }
        }
        lastSerial += 1
        let key = SharedTCPAdmission.Key(loop: nextLoop, serial: lastSerial)
        nextLoop = (nextLoop + 1) % admission.drivers.count
        admission.pending.withLock { $0.insert(key, source: source) }
        admission.load.add(1)
        guard key.loop != index else { return run(socket, key: key, charge: charge) }
        let target = admission.drivers[key.loop]
        let handedOver = UnsafeTransfer(socket)  // from here on used on the target loop only
        target.loop.execute { [admission, charge] in
            guard let driver = target.value else {  // the server is shutting down
                admission.forget(key, charge: charge)
                return handedOver.value.close()
            }
            driver.run(handedOver.value, key: key, charge: charge)
        }
    }

    /// Starts the handshake of a connection the accepting driver admitted and dealt to this loop, unless it was
    /// evicted on the way.
    private func run(_ socket: TCPSocket, key: SharedTCPAdmission.Key, charge: SourceLedger.Charge?) {
        guard admission.pending.withLock({ $0.contains(key) }) else {
            admission.forget(key, charge: charge)
            return refuse(socket)
        }
        do {
            try adopt(socket, key: key)
            if let charge { charges[key.serial] = charge }
        } catch {
            admission.forget(key, charge: charge)
            refuse(socket)
        }
    }

    /// Drops a pending handshake evicted to make room.
    private func abortPending(_ serial: UInt64, _ error: TransportError) {
        let victim = drivers[serial]  // its teardown removes it from `drivers`: no access may be open then
        victim?.abort(error)
    }

    /// Resets and closes at once: no handshake state is held for a connection the relay will not serve.
    private func refuse(_ socket: TCPSocket) {
        socket.resetOnClose()
        socket.close()
    }

    /// A connection ended: its source may open another.
    private func release(_ serial: UInt64) {
        guard drivers.removeValue(forKey: serial) != nil else { return }
        admission.forget(
            SharedTCPAdmission.Key(loop: index, serial: serial), charge: charges.removeValue(forKey: serial))
    }

    /// Starts the connection's driver, under `key.serial` in `drivers`. The kernel's buffers of the socket are fixed
    /// at `TCPConnectionBudget`'s sizes first.
    private func adopt(_ socket: TCPSocket, key pendingKey: SharedTCPAdmission.Key) throws(TransportError) {
        socket.limitBuffers(
            send: TCPConnectionBudget.kernelSendBuffer, receive: TCPConnectionBudget.kernelReceiveBuffer)
        let core = try QMuxOverTLS(server: tls, parameters: parameters, now: MonotonicClock.now())
        let driver = QMuxConnectionDriver(
            loop: loop, pump: TLSStreamPump(loop: loop, core: core, socket: socket, connected: true, limits: .relay),
            outbound: DatagramQueue(capacity: configuration.datagramSendBuffer), remote: socket.remoteAddress,
            datagramReceiveBuffer: configuration.datagramReceiveBuffer)
        let key = pendingKey.serial
        drivers[key] = driver
        let remote = socket.remoteAddress.description
        let maximumMessageSize = configuration.maximumMessageSize
        let started = MonotonicClock.now()
        driver.onHandshakeResult = { [weak self, unowned driver] result in
            guard let self else { return }
            admission.removePending(pendingKey)
            let succeeded = if case .success = result { true } else { false }
            metrics.handshake(
                succeeded: succeeded, resumed: succeeded && driver.core.isResumed,
                nanoseconds: MonotonicClock.now() &- started)
            guard succeeded else { return }
            accepted(
                TransportConnection(
                    path: .tcp, remoteAddress: remote, backend: driver,
                    sinks: driver.sinks, maximumMessageSize: maximumMessageSize))
            if let drainDeadline { driver.askToMove(before: drainDeadline) }  // mid-handshake when the drain began
        }
        // Unowned: only the driver calls this, from `tearDown` (a weak reference would give it a side table and
        // slow every retain of it).
        driver.onFinished = { [weak self, unowned driver] in
            self?.metrics.endedDatagrams.add(driver.pump.statistics(driver))
            self?.release(key)
            self?.heapRelease?.connectionFreed()
        }
        do {
            try driver.start()
        } catch {
            drivers[key] = nil
            throw error
        }
    }

    /// Closes every connection with `code`.
    func shutdown(code: UInt64) {
        for driver in drivers.values { driver.closeSoon(code: code, reason: "server shutting down") }
    }

    /// Stops accepting and closes the listener.
    func closeListener() {
        stopAccepting()
        admission.load.add(-drivers.count)
        drivers.removeAll()
    }

    /// Stops accepting and closes the listener (new clients get a reset), keeping the connections (a drain).
    func stopAccepting() {
        listening = false
        loop.cancelTimer(resumeTimerID)
        if let listener, !listenerClosed {
            listenerClosed = true
            loop.unregister(fd: listener.fd)
            listener.close()
        }
    }

    /// A drain until `deadline` (monotonic): asks every client to move to another relay (see `RelayNotice`); one
    /// still in its handshake is asked when it completes.
    func drain(until deadline: UInt64) {
        drainDeadline = deadline
        for driver in drivers.values { driver.askToMove(before: deadline) }
    }
}
