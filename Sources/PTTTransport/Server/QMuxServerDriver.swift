import TransportCore
import TransportIO

/// The loop side of a relay's TCP listener: accepts connections and runs QMux over TLS 1.3 on each, handing
/// each one to the same application handler as QUIC connections once it is ready.
final class QMuxServerDriver {
    let loop: EventLoop
    let listener: TCPListener
    let tls: TLSServerContext
    let configuration: ServerConfiguration
    let parameters: QUICParameters
    private var drivers: [ObjectIdentifier: QMuxConnectionDriver] = [:]
    /// Connections accepted whose handshake has not finished: per-source budget and overall cap.
    private var pending: PendingHandshakes<ObjectIdentifier>
    /// Live connections and new-connection rate per source (`perSourceLimits`, shared in meaning with QUIC: a
    /// client refused there must not get round it by falling back to TCP). A TCP handshake proves the address.
    private var ledger: SourceLedger?
    private var charges: [ObjectIdentifier: SourceLedger.Charge] = [:]
    /// Connections closed at accept because their source held or opened too many (`perSourceLimits`).
    private(set) var refusedOverSourceLimits = 0
    /// Called on the loop for every connection that became ready.
    let accepted: (TransportConnection) -> Void
    /// Accept failures so far (e.g. out of descriptors); the listener keeps going.
    private(set) var acceptFailures = 0
    /// Connections closed at accept because their source was over its pending-handshake budget.
    private(set) var refusedOverSourceBudget = 0
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
        loop: EventLoop, listener: TCPListener, tls: TLSServerContext, configuration: ServerConfiguration,
        accepted: @escaping (TransportConnection) -> Void
    ) throws(TransportError) {
        self.loop = loop
        self.listener = listener
        self.tls = tls
        self.configuration = configuration
        self.parameters = configuration.quicParameters
        self.accepted = accepted
        pending = PendingHandshakes(
            limit: configuration.maxPendingTCPHandshakes,
            perSource: configuration.maxPendingTCPHandshakesPerSource)
        ledger = configuration.perSourceLimits.map { SourceLedger(limits: $0.core) }
        resumeTimerID = loop.makeTimerID()
        try watchListener()
    }

    var connectionCount: Int { drivers.count }

    var statistics: TCPAdmissionStatistics {
        var statistics = TCPAdmissionStatistics()
        statistics.pendingHandshakes = pending.count
        statistics.refusedOverSourceBudget = refusedOverSourceBudget
        statistics.refusedOverSourceLimits = refusedOverSourceLimits
        statistics.evictedPendingHandshakes = evictedPending
        statistics.refusedForDescriptors = refusedForDescriptors
        statistics.acceptFailures = acceptFailures
        return statistics
    }

    private func watchListener() throws(TransportError) {
        try loop.register(fd: listener.fd, events: EventLoop.readable) { [weak self] _ in self?.acceptAll() }
    }

    private func acceptAll() {
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
        loop.unregister(fd: listener.fd)
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
    /// pending budget, or from a source over `perSourceLimits`. At the pending cap, the longest-pending handshake
    /// is dropped to make room.
    private func admit(_ socket: TCPSocket) {
        let source = PendingHandshakes<ObjectIdentifier>.Source(socket.remoteAddress)
        let admission = pending.admission(for: source)
        let full = drivers.count >= configuration.maxConnections  // evicting a pending one frees a slot
        if admission == .refuse || (full && admission == .admit) {
            if admission == .refuse { refusedOverSourceBudget += 1 }
            refuse(socket)
            return
        }
        var charge: SourceLedger.Charge?
        if ledger != nil {
            guard
                case .admitted(let admitted) = ledger!.admit(
                    socket.remoteAddress, validated: true,
                    now: MonotonicClock.now())
            else {
                refusedOverSourceLimits += 1
                refuse(socket)
                return
            }
            charge = admitted
        }
        if case .admitAfterEvicting(let oldest) = admission {
            evictedPending += 1
            pending.remove(oldest)
            let victim = drivers[oldest]  // its teardown removes it from `drivers`: no access may be open then
            victim?.abort(
                TransportError(
                    .connectionRefused,
                    "dropped during the handshake: the server had \(pending.limit) TCP handshakes pending"))
        }
        do {
            let key = try adopt(socket, source: source)
            if let charge { charges[key] = charge }
        } catch {
            if let charge { ledger?.release(charge, now: MonotonicClock.now()) }
            refuse(socket)
        }
    }

    /// Resets and closes at once: no handshake state is held for a connection the relay will not serve.
    private func refuse(_ socket: TCPSocket) {
        socket.resetOnClose()
        socket.close()
    }

    /// A connection ended: its source may open another.
    private func release(_ key: ObjectIdentifier) {
        pending.remove(key)
        drivers[key] = nil
        if let charge = charges.removeValue(forKey: key) { ledger?.release(charge, now: MonotonicClock.now()) }
    }

    /// Starts the connection's driver; returns its key in `drivers`.
    private func adopt(
        _ socket: TCPSocket, source: PendingHandshakes<ObjectIdentifier>.Source
    )
        throws(TransportError) -> ObjectIdentifier
    {
        let core = try QMuxOverTLS(server: tls, parameters: parameters, now: MonotonicClock.now())
        let driver = QMuxConnectionDriver(
            loop: loop, core: core, socket: socket, connected: true,
            datagramReceiveBuffer: configuration.datagramReceiveBuffer,
            datagramSendBuffer: configuration.datagramSendBuffer)
        let key = ObjectIdentifier(driver)
        drivers[key] = driver
        let remote = socket.remoteAddress.description
        let maximumMessageSize = configuration.maximumMessageSize
        driver.onHandshakeResult = { [weak self, unowned driver] result in
            guard let self else { return }
            pending.remove(key)
            guard case .success = result else { return }
            accepted(
                TransportConnection(
                    path: .tcp, remoteAddress: remote, backend: driver,
                    sinks: driver.sinks, maximumMessageSize: maximumMessageSize))
        }
        driver.onFinished = { [weak self] in self?.release(key) }
        pending.insert(key, source: source)
        do {
            try driver.start()
        } catch {
            pending.remove(key)
            drivers[key] = nil
            throw error
        }
        return key
    }

    /// Closes every connection with `code`.
    func shutdown(code: UInt64) {
        for driver in drivers.values { driver.closeSoon(code: code, reason: "server shutting down") }
    }

    /// Stops accepting and closes the listener.
    func closeListener() {
        listening = false
        loop.cancelTimer(resumeTimerID)
        loop.unregister(fd: listener.fd)
        listener.close()
        drivers.removeAll()
    }
}
