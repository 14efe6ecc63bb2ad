import TransportCore
import TransportIO

/// The loop side of a QUIC server: reads this loop's UDP socket, lets the sans-IO endpoint route each packet,
/// and keeps one `QUICConnectionDriver` per live connection. With several loops, each has its own driver, socket
/// and endpoint; a packet whose connection ID names another loop (the kernel hashed it here) is handed over to
/// that loop's driver.
final class QUICServerDriver: AfterOutputWork {
    let loop: EventLoop
    let socket: UDPSocket
    /// Every connection's packets (and the endpoint's replies) leave through this batch, once per loop turn.
    let sender: UDPSendBatch
    let endpoint: QUICServerEndpoint
    let configuration: ServerConfiguration
    private let group: ServerLoopGroup
    private let load: ServerLoad
    private var drivers: [ObjectIdentifier: QUICConnectionDriver] = [:]
    /// While draining: when the relay closes (monotonic).
    private var drainDeadline: UInt64?
    /// Reads the socket several datagrams per system call.
    private let receiver: UDPReceiveBatch
    /// What this loop's socket received, and how many of those packets went to another loop and came from one.
    private(set) var counters = QUICLoopCounters()
    /// Handshakes and ended connections' datagrams, for the relay's metrics.
    private(set) var metrics = RelayLoopMetrics()
    /// Called on the loop for every connection whose handshake completed; true when its client chose one of the
    /// configuration's `additionalALPNs`.
    let accepted: (TransportConnection, Bool) -> Void
    /// Returns what finished connections freed to the system.
    private let heapRelease: HeapRelease?
    /// Packets that may start a connection (Initials, and what follows them before their connection exists), taken
    /// `newcomersPerTurn` at a time once the turn's output left (`EventLoop.afterOutput`): the packets of the
    /// established connections are read, answered and sent first, so a storm of handshakes shares the loop with the
    /// calls it serves instead of holding it, or their answers, for hundreds of milliseconds.
    private var newcomers = FIFOQueue<QUICServerEndpoint.HeldPacket>()
    /// Held first flights whose claim was answered, fed again in the same turns, before the newcomers (a burst of
    /// answers is a burst of handshakes too).
    private var answered = FIFOQueue<(key: QUICServerEndpoint.HeldFlightKey, claim: ZeroRTTClaim, accepted: Bool)>()
    private var newcomerBytes = 0
    private var newcomersScheduled = false
    /// The most bytes of such packets waiting (beyond, they are dropped: their clients send them again).
    static let maxNewcomerBytes = 4 << 20
    static let newcomersPerTurn = 16

    init(
        loop: EventLoop, socket: UDPSocket, endpoint: QUICServerEndpoint, configuration: ServerConfiguration,
        group: ServerLoopGroup, load: ServerLoad, accepted: @escaping (TransportConnection, Bool) -> Void
    ) throws(TransportError) {
        self.loop = loop
        self.socket = socket
        self.sender = try UDPSendBatch(socket: socket, loop: loop)
        self.receiver = try UDPReceiveBatch(socket: socket)
        self.endpoint = endpoint
        self.configuration = configuration
        self.group = group
        self.load = load
        self.accepted = accepted
        self.heapRelease = configuration.releasesFreedMemory ? HeapRelease(loop: loop) : nil
        if configuration.releasesFreedMemory { HeapReserve.onThisThread() }  // a relay process: see HeapReserve
        try loop.register(fd: socket.fd, events: EventLoop.readable) { [weak self] ready in
            if ready & EventLoop.writable != 0 { self?.sender.socketWritable() }
            if ready & ~EventLoop.writable != 0 { self?.readable() }
        }
    }

    var connectionCount: Int { drivers.count }
    /// Of those, the ones not closed yet (QUIC's closing period and QMux's last bytes left out).
    var openConnectionCount: Int { drivers.values.openCount() }

    /// Reads what waits on the socket, a burst per system call, for at most 512 datagrams a turn (then the loop's
    /// other work runs, and epoll reports the rest). A burst shorter than asked for emptied the socket: the read
    /// stops there instead of making one more system call that finds nothing (epoll is level-triggered, so a
    /// datagram that arrives meanwhile, or a pending error, is reported in the next turn). Sequential handshakes
    /// made two reads per datagram before, one of them empty.
    private func readable() {
        var budget = 512
        while budget > 0 {
            let count: Int
            let asked = min(budget, UDPReceiveBatch.defaultSlots)
            do {
                count = try receiver.receive(upTo: asked) { packet, received in
                    counters.packetsReceived += 1
                    if group.totalLoops > 1, let owner = endpoint.owningLoop(of: packet),
                        owner != group.firstLoop + group.index
                    {
                        let local = owner - group.firstLoop
                        guard group.drivers.indices.contains(local) else {
                            // Another worker's connection (a packet queued while this worker restarted): not ours
                            // to answer — a stateless reset would end a connection that lives on elsewhere.
                            counters.packetsForOtherWorkers += 1
                            return
                        }
                        handOver(packet, received, to: group.drivers[local])
                        return
                    }
                    handle(packet, from: received.remote, to: received.local, ecn: received.ecn)
                }
            } catch {
                budget -= 1
                continue  // an ICMP error for one peer must not stop the server
            }
            if count < asked { return }
            budget -= count
        }
    }

    /// The kernel put another loop's packet here (hashing, or the probe found its steering program misrouting):
    /// one copy to that loop, which handles it as if its own socket had received it.
    private func handOver(
        _ packet: UnsafeRawBufferPointer, _ received: UDPSocket.Received, to owner: LoopBound<QUICServerDriver?>
    ) {
        counters.packetsHandedOver += 1
        let bytes = [UInt8](packet)
        let (remote, local, ecn) = (received.remote, received.local, received.ecn)
        owner.loop.execute {
            guard let driver = owner.value else { return }
            driver.counters.packetsTakenOver += 1
            bytes.withUnsafeBytes { packet in
                driver.handle(packet, from: remote, to: local, ecn: ecn)
            }
        }
    }

    private func handle(
        _ packet: UnsafeRawBufferPointer, from remote: SocketAddress, to local: SocketAddress, ecn: UInt32
    ) {
        guard !endpoint.mayStartConnection(packet) else {
            guard newcomerBytes + packet.count <= Self.maxNewcomerBytes else { return }
            newcomers.append(.init(bytes: Array(packet), remote: remote, local: local, ecn: ecn))
            newcomerBytes += packet.count
            return scheduleNewcomers()
        }
        process(packet, from: remote, to: local, ecn: ecn)
    }

    /// Has the next `newcomersPerTurn` held flights and packets that may start connections taken once this turn's
    /// output left (`runAfterOutput`).
    private func scheduleNewcomers() {
        guard !newcomersScheduled else { return }
        newcomersScheduled = true
        loop.afterOutput(self)
    }

    /// Takes the next `newcomersPerTurn` held flights to feed again and packets that may start connections (in
    /// arrival order, so a client's 0-RTT packets follow its Initial); more wait for the next turn of the loop,
    /// after its sockets were read and what they asked for was sent.
    func runAfterOutput() {
        newcomersScheduled = false
        var budget = Self.newcomersPerTurn
        while budget > 0, let flight = answered.popFirst() {
            feedAgain(flight.key, flight.claim, accepted: flight.accepted)
            budget -= 1
        }
        while budget > 0, let next = newcomers.popFirst() {
            newcomerBytes -= next.bytes.count
            next.bytes.withUnsafeBytes { process($0, from: next.remote, to: next.local, ecn: next.ecn) }
            budget -= 1
        }
        if !answered.isEmpty || !newcomers.isEmpty { scheduleNewcomers() }
    }

    /// A held flight's claim was answered (or the flight outgrew its bound): it is fed again in the next turns.
    private func answer(_ key: QUICServerEndpoint.HeldFlightKey, _ claim: ZeroRTTClaim, accepted: Bool) {
        answered.append((key, claim, accepted))
        scheduleNewcomers()
    }

    private func process(
        _ packet: UnsafeRawBufferPointer, from remote: SocketAddress, to local: SocketAddress, ecn: UInt32
    ) {
        let now = MonotonicClock.now()
        switch endpoint.receive(packet: packet, from: remote, to: local, ecn: ecn, now: now) {
        case .deliver(let core):
            core.receive(packet: packet, from: remote, to: local, ecn: ecn, now: now)
            drivers[ObjectIdentifier(core)]?.processSoon()
        case .accepted(let core):
            adopt(core, remote: remote, local: local).processSoon()
        case .reply(let bytes):
            _ = bytes.withUnsafeBytes {  // a reply without room is answered again when the peer retransmits
                sender.enqueue($0, to: remote, from: local, ecn: 0)
            }
        case .drop:
            break
        case .held(let key, let claim):
            counters.flightsHeld += 1
            guard let admission = endpoint.tls.zeroRTTAdmission else { return answer(key, claim, accepted: false) }
            admission.claim(claim.ticket) { [weak self] accepted in self?.answer(key, claim, accepted: accepted) }
        case .overflowed(let key, let claim):
            answer(key, claim, accepted: false)
        }
    }

    /// The anti-replay store answered the claim of a held first flight (or it outgrew its bound): its packets go
    /// through the endpoint again, in order, and GnuTLS takes the answer for that ticket.
    private func feedAgain(_ key: QUICServerEndpoint.HeldFlightKey, _ claim: ZeroRTTClaim, accepted: Bool) {
        endpoint.feedAgain(key, claim: claim, accepted: accepted) { packet in
            packet.bytes.withUnsafeBytes { process($0, from: packet.remote, to: packet.local, ecn: packet.ecn) }
        }
    }

    private func adopt(_ core: QUICConnection, remote: SocketAddress, local: SocketAddress) -> QUICConnectionDriver {
        let driver = QUICConnectionDriver(
            loop: loop, pump: UDPPacketPump(loop: loop, core: core, sender: sender, remote: remote, local: local),
            outbound: core.datagrams, remote: remote, datagramReceiveBuffer: configuration.datagramReceiveBuffer)
        let key = ObjectIdentifier(core)
        drivers[key] = driver
        load.add(1)
        let maximumMessageSize = configuration.maximumMessageSize
        let connection = { [unowned driver] in
            TransportConnection(
                path: .quic, remoteAddress: remote.description, backend: driver,
                sinks: driver.sinks,
                maximumMessageSize: maximumMessageSize)
        }
        // With additional protocols, a connection is handed out once its ALPN is known (after its ClientHello),
        // to the stream of its protocol; early (0.5-RTT) only to the main one.
        let additional = configuration.additionalALPNs
        let isAdditional = { [unowned driver] in driver.core.negotiatedALPN.map(additional.contains) ?? false }
        let handsOutEarly =
            configuration.earlyData.handsOutEarly
            && (additional.isEmpty || driver.core.negotiatedALPN == configuration.alpn)
        let started = MonotonicClock.now()
        if handsOutEarly {
            // 0.5-RTT: the application sees the connection (and early stream data) now; early datagrams wait
            // unless the policy delivers them too.
            driver.early.holdsDatagrams = !configuration.earlyData.deliverEarlyDatagrams
            accepted(connection(), false)
        }
        driver.onHandshakeResult = { [weak self, unowned driver] result in
            guard let self else { return }
            let succeeded = if case .success = result { true } else { false }
            metrics.handshake(
                succeeded: succeeded, resumed: succeeded && driver.core.isResumed,
                nanoseconds: MonotonicClock.now() &- started)
            guard succeeded else { return }
            if !handsOutEarly { accepted(connection(), isAdditional()) }
            if let drainDeadline { driver.askToMove(before: drainDeadline) }  // mid-handshake when the drain began
        }
        // Weak: connection drivers may finish their closing period after the server driver is gone.
        // The core strongly (no cycle: it knows no driver), the driver unowned (only the driver calls this, from
        // `tearDown`): a weak reference gives the object a side table, and then every retain of it (several per
        // forwarded copy) takes the runtime's slow path.
        driver.onFinished = { [weak self, unowned driver, core] in
            guard let self else { return }
            // Its counters only: full `ConnectionStatistics` format the local address, per connection that ends.
            let sample = core.metricsSample
            metrics.endedDatagrams.add(
                sample.counters, expired: sample.datagramsExpired, dropped: driver.sinks.datagramsDropped)
            endpoint.remove(core)
            if drivers.removeValue(forKey: key) != nil { load.add(-1) }
            heapRelease?.connectionFreed()
        }
        return driver
    }

    /// This loop's QUIC peers at the addresses they proved, with the bytes received from there and the IDs each
    /// may address the relay by (for `PeerSnapshotKeeper`); a connection still in its handshake is left out.
    func peers() -> [PeerSnapshot.Peer] {
        drivers.values.compactMap { driver in
            driver.core.provenRemote.map { proven in
                PeerSnapshot.Peer(
                    remote: proven.address, local: driver.local, received: proven.received,
                    ids: driver.core.issuedConnectionIDs)
            }
        }
    }

    /// The live connections by QUIC version ("1", "2", or "handshake" before it settled) and their datagrams.
    /// Per connection it reads counters only (`QUICConnection.metricsSample`): no `ConnectionStatistics`, whose
    /// recovery figures and address text cost a scrape over 1,000 connections most of its loop time.
    func liveMetrics() -> (versions: [String: Int], datagrams: DatagramTotals) {
        var byCodepoint: [UInt32: Int] = [:]
        var handshaking = 0
        var datagrams = DatagramTotals()
        for driver in drivers.values {
            let sample = driver.core.metricsSample
            if driver.core.isHandshakeCompleted {
                byCodepoint[sample.version, default: 0] += 1
            } else {
                handshaking += 1
            }
            datagrams.add(sample.counters, expired: sample.datagramsExpired, dropped: driver.sinks.datagramsDropped)
        }
        var versions: [String: Int] = handshaking > 0 ? ["handshake": handshaking] : [:]
        for (codepoint, count) in byCodepoint {
            versions[QUICVersion(wireValue: codepoint)?.description ?? "other", default: 0] += count
        }
        return (versions, datagrams)
    }

    /// A drain until `deadline` (monotonic): refuses new connections and asks every client to move to another
    /// relay (see `RelayNotice`); one still in its handshake is asked when it completes.
    func drain(until deadline: UInt64) {
        endpoint.refusesNewConnections = true
        drainDeadline = deadline
        for driver in drivers.values { driver.askToMove(before: deadline) }
    }

    /// Closes every connection (CONNECTION_CLOSE with `code`) and stops reading.
    func shutdown(code: UInt64) {
        for driver in drivers.values { driver.closeSoon(code: code, reason: "server shutting down") }
    }

    /// Stops reading and closes the socket (after `shutdown` let the CONNECTION_CLOSE packets out).
    func closeSocket() {
        sender.flush()
        loop.unregister(fd: socket.fd)
        socket.close()
        load.add(-drivers.count)
        drivers.removeAll()
        newcomers = FIFOQueue()  // no handshake starts on a closed socket
        answered = FIFOQueue()
        newcomerBytes = 0
    }
}

extension ServerConfiguration {
    /// The endpoint's admission limits: the table size, Retry under load, and the per-source budget.
    var quicLimits: QUICServerEndpoint.Limits {
        var limits = QUICServerEndpoint.Limits()
        limits.maxConnections = maxConnections
        limits.retryAboveConnections = retryAboveConnections
        limits.perSource = perSourceLimits?.core
        return limits
    }
}

extension TransportServer {
    /// UDP payloads the QUIC endpoint dropped without a reply or a connection (empty, truncated, garbage,
    /// rate-limited), since the server started.
    package func droppedQUICPackets() async -> UInt64 {
        var dropped: UInt64 = 0
        for driver in quic { dropped += (try? await driver.loop.submit { driver.value?.endpoint.droppedPackets }) ?? 0 }
        return dropped
    }

    /// Each loop's QUIC packet counters, in loop order (empty without a QUIC address).
    package func quicLoopCounters() async -> [QUICLoopCounters] {
        var counters: [QUICLoopCounters] = []
        for driver in quic {
            if let loopCounters = try? await driver.loop.submit({ driver.value?.counters }) ?? nil {
                counters.append(loopCounters)
            }
        }
        return counters
    }

    /// The index in `loops` of the loop `connection` lives on (nil: not a connection of this server).
    package func loopIndex(of connection: TransportConnection) -> Int? {
        loops.firstIndex { $0 === connection.backend.loop }
    }
}

/// What one loop's QUIC socket received since the server started.
package struct QUICLoopCounters: Sendable, Equatable {
    /// Datagrams read from this loop's socket.
    package var packetsReceived: UInt64 = 0
    /// Of those, packets whose connection ID named another loop, handed over to it (0 while the kernel steers).
    package var packetsHandedOver: UInt64 = 0
    /// Packets other loops handed over to this one.
    package var packetsTakenOver: UInt64 = 0
    /// A worker's packets for another worker's connection, dropped (see `InheritedSockets`).
    package var packetsForOtherWorkers: UInt64 = 0
    /// First flights held while their ticket's claim was asked of the shared anti-replay store.
    package var flightsHeld: UInt64 = 0
}
