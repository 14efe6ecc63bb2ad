import TransportCore
import TransportIO

/// A relay's listening side: accepts QUIC connections (and QMux over TCP when configured), verifies ALPN, and
/// hands each connection to the application once its handshake completed.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: .init(
///     quic: "0.0.0.0:4433", certificateChain: "certs/server.pem", privateKey: "certs/server.key"))
/// for await connection in server.connections { ... }
/// ```
public final class TransportServer: Sendable {
    /// The bound QUIC address, with the real port when bound to port 0 (`quicAddress?.port`); nil without QUIC.
    /// Its `description` is the `host:port` text the CLI prints (`[::1]:4433` for IPv6).
    public let quicAddress: ServerAddress?
    /// The bound TCP (QMux) address, when configured, with the real port.
    public let tcpAddress: ServerAddress?
    /// Connections whose handshake completed, in order.
    public let connections: IncomingConnections
    /// The first event loop (the only one with `eventLoops` 1).
    package let loop: EventLoop
    /// Every event loop, in the order of their UDP sockets in the SO_REUSEPORT group (`loops[0] === loop`).
    package let loops: [EventLoop]
    /// How packets reach the loop owning their connection (`.single` with one loop).
    package let steering: ReuseportGroup.Steering
    /// Why this server refuses 0-RTT although its configuration enables it, and what to install; nil when it
    /// serves 0-RTT as configured. Set when the linked GnuTLS lacks the fix for a segfault on the QUIC early-data
    /// path (see ``LinkedLibraries/zeroRTTRefusal``): clients still resume, in 1-RTT.
    public let zeroRTTRefusal: String?
    /// One QUIC driver per loop (nil without a QUIC address).
    let quic: [LoopBound<QUICServerDriver?>]
    /// One TCP (QMux) driver per loop (nil without a TCP address).
    let tcp: [LoopBound<QMuxServerDriver?>]
    /// Each loop's in-process anti-replay store (one object shared by all when there are several loops; nil with
    /// early data disabled or a Redis store).
    let antiReplayStores: [LoopBound<AntiReplayStore?>]
    private let connectionMailbox: Mailbox<TransportConnection>
    private let stopped = Locked(false)
    /// The peer snapshot this server keeps (`ServerConfiguration.peerSnapshotFile`), once bound.
    let peerSnapshot = Locked<PeerSnapshotKeeper?>(nil)
    /// What this relay sent its previous run's clients at start, when it found a peer snapshot.
    package let restartResets = Locked<RestartResetReport?>(nil)
    /// The fleet's anti-replay store, when configured (set once, while binding).
    private let redisAntiReplay = Locked<RedisAntiReplayShared?>(nil)
    /// The ticket key the server was bound with (random for the process when no file is configured).
    let processTicketKey = Locked<[UInt8]>([])
    /// Whether `drain` began.
    package let draining = Locked(false)
    /// Whether the configuration enables early data (after the GnuTLS safety check).
    package let earlyDataEnabled: Bool
    /// Whether `shutdown` stops the loops (false for a server bound on another server's loop).
    private let ownsLoops: Bool

    private init(
        loops: [EventLoop], steering: ReuseportGroup.Steering, quicAddress: ServerAddress?, tcpAddress: ServerAddress?,
        connections: Mailbox<TransportConnection>, zeroRTTRefusal: String?, earlyDataEnabled: Bool, ownsLoops: Bool
    ) {
        self.ownsLoops = ownsLoops
        self.earlyDataEnabled = earlyDataEnabled
        self.loop = loops[0]
        self.loops = loops
        self.steering = steering
        self.zeroRTTRefusal = zeroRTTRefusal
        self.quicAddress = quicAddress
        self.tcpAddress = tcpAddress
        self.connections = IncomingConnections(base: connections)
        self.connectionMailbox = connections
        self.quic = loops.map { LoopBound(nil, loop: $0) }
        self.tcp = loops.map { LoopBound(nil, loop: $0) }
        self.antiReplayStores = loops.map { LoopBound(nil, loop: $0) }
    }

    /// Binds the configured sockets, loads the certificate and key, and starts accepting.
    ///
    /// - Throws: `invalidConfiguration` (bad address, unreadable certificate or key, bad ticket key file, a limit
    ///   below 1), `systemCallFailed` (e.g. address in use, or the process is out of file descriptors so the event
    ///   loop or a socket cannot be created).
    public static func bind(configuration: ServerConfiguration) async throws -> TransportServer {
        let loop = try EventLoop(name: "ptt-server")
        do {
            return try await bind(configuration: configuration, loop: loop)
        } catch {
            loop.shutdown()
            throw error
        }
    }

    /// Binds on a given loop; its sockets are created on the loop's thread (and so in its network namespace).
    /// The server owns the loop from here on and stops it in `shutdown()`; it starts `eventLoops` - 1 more.
    package static func bind(configuration: ServerConfiguration, loop: EventLoop) async throws -> TransportServer {
        let count = min(max(configuration.eventLoops, 1), 64)
        var loops = [loop]
        do {
            for index in 1..<count { loops.append(try EventLoop(name: "ptt-server-\(index)")) }
            return try await bind(configuration: configuration, loops: loops)
        } catch {
            for extra in loops.dropFirst() { extra.shutdown() }
            throw error
        }
    }

    /// Binds on `loop`, which another server owns and keeps running: one loop (whatever `eventLoops` says), and
    /// `shutdown` closes this server's sockets and connections but leaves the loop to its owner (a relay's trunk
    /// listener on the relay server's first loop).
    package static func bind(
        configuration: ServerConfiguration, sharing loop: EventLoop
    ) async throws
        -> TransportServer
    {
        try await bind(configuration: configuration, loops: [loop], ownsLoops: false)
    }

    private static func bind(
        configuration asGiven: ServerConfiguration, loops: [EventLoop], ownsLoops: Bool = true
    ) async throws
        -> TransportServer
    {
        let loop = loops[0]
        let zeroRTTRefusal = asGiven.earlyData.isEnabled ? asGiven.gnutlsSafety.zeroRTTRefusal : nil
        let configuration = zeroRTTRefusal == nil ? asGiven : asGiven.withEarlyData(.disabled)
        guard configuration.quic != nil || configuration.tcp != nil else {
            throw TransportError(.invalidConfiguration, "no listening address configured (neither QUIC nor TCP)")
        }
        guard configuration.maxPendingTCPHandshakes >= 1, configuration.maxPendingTCPHandshakesPerSource >= 1 else {
            throw TransportError(
                .invalidConfiguration,
                "maxPendingTCPHandshakes and maxPendingTCPHandshakesPerSource "
                    + "must be at least 1 (they are \(configuration.maxPendingTCPHandshakes) and "
                    + "\(configuration.maxPendingTCPHandshakesPerSource))")
        }
        let udpAddress = try configuration.quic.map(Self.parse)
        let tcpAddress = try configuration.tcp.map(Self.parse)
        try QlogSafety.check(directory: configuration.qlogDirectory)
        let (loadedTicketKey, previousTicketKey, fleetSecrets) = try configuration.loadSecrets()
        // One key for every loop's TLS context, random for the process when none is configured (kept by `reload`).
        let ticketKey = loadedTicketKey ?? (0..<64).map { _ in UInt8.random(in: 0...255) }
        let accepted = Mailbox<TransportConnection>()
        let loopCount = loops.count
        let sockets = try await loop.submit { [tcpAddress] in
            if let inherited = configuration.inheritedSockets {  // a worker: the parent bound and steers them
                return UnsafeTransfer(
                    (
                        try inherited.udp.map { fd throws(TransportError) in try UDPSocket(adopting: fd) },
                        try inherited.tcp.map { fd throws(TransportError) in try TCPListener(adopting: fd) },
                        ReuseportGroup.Steering.kernelProgram
                    ))
            }
            // Port 0 on both, same address: the same port number for both, which the kernel chose for UDP and
            // which another program may hold for TCP; then try another port (a few times) rather than fail.
            let samePort = tcpAddress.map { $0.port == 0 && $0 == udpAddress } ?? false
            var attempt = 0
            while true {
                attempt += 1
                let udps = try udpAddress.map { address throws(TransportError) in
                    loopCount == 1
                        ? [try UDPSocket(bindingTo: address)] : try ReuseportGroup.bind(address, count: loopCount)
                }
                let udp = udps?.first
                var tcpAddress = tcpAddress
                if samePort, let udp, let requested = tcpAddress {
                    tcpAddress = requested.with(port: udp.localAddress.port)
                }
                do {
                    let tcp = try tcpAddress.map { address throws(TransportError) in
                        try TCPListener(bindingTo: address)
                    }
                    return UnsafeTransfer(
                        (
                            udps ?? [], tcp,
                            ReuseportGroup.steer(
                                udps ?? [], useProgram: configuration.steeringProgram, quicLB: configuration.quicLB)
                        ))
                } catch {
                    for socket in udps ?? [] { socket.close() }
                    if samePort && attempt < 20 { continue }
                    throw error
                }
            }
        }
        // Stateless resets are this relay's own: keyed by its identity, which needs the bound QUIC port.
        let secrets = fleetSecrets.forRelay(
            configuration.resolvedRelayIdentity(quicPort: sockets.value.0.first?.localAddress.port ?? 0))
        let server = TransportServer(
            loops: loops, steering: sockets.value.2,
            quicAddress: sockets.value.0.first.map { ServerAddress(bound: $0.localAddress) },
            tcpAddress: sockets.value.1.map { ServerAddress(bound: $0.localAddress) },
            connections: accepted, zeroRTTRefusal: zeroRTTRefusal,
            earlyDataEnabled: configuration.earlyData.isEnabled, ownsLoops: ownsLoops)
        server.processTicketKey.withLock { $0 = ticketKey }
        let shared = try SharedServerState(configuration: configuration, loops: loops.count)
        server.redisAntiReplay.withLock { $0 = shared.redis }
        let tcpAdmission = SharedTCPAdmission(
            configuration: configuration, drivers: server.tcp, load: shared.load, relayWide: shared.relayWide)
        do {
            for (index, loop) in loops.enumerated() {
                try await loop.submit { [server] in
                    let tls = try configuration.makeTLSContext(
                        ticketKey: ticketKey, previousTicketKey: previousTicketKey,
                        antiReplayStore: shared.zeroRTTAdmission(loop: loop))
                    server.antiReplayStores[index].value = tls.antiReplayStore
                    if index < sockets.value.0.count {
                        let endpoint = try QUICServerEndpoint(
                            parameters: configuration.quicEndpointParameters, tls: tls, secrets: secrets,
                            requireRetry: configuration.requireRetry, limits: configuration.quicLimits)
                        try shared.share(with: endpoint, loop: index, quicLB: configuration.quicLB)
                        server.quic[index].value = try QUICServerDriver(
                            loop: loop, socket: sockets.value.0[index], endpoint: endpoint,
                            configuration: configuration,
                            group: ServerLoopGroup(
                                index: index, drivers: server.quic, inherited: configuration.inheritedSockets),
                            load: shared.load
                        ) { connection in accepted.send(connection) }
                    }
                    if sockets.value.1 != nil {  // the first loop accepts and deals connections to every loop
                        server.tcp[index].value = try QMuxServerDriver(
                            loop: loop, listener: index == 0 ? sockets.value.1 : nil, tls: tls,
                            configuration: configuration,
                            index: index, admission: tcpAdmission
                        ) { connection in accepted.send(connection) }
                    }
                }
            }
        } catch {
            for (index, loop) in loops.enumerated() {
                _ = try? await loop.submit { [server] in
                    server.quic[index].value?.closeSocket()
                    server.quic[index].value = nil
                    server.tcp[index].value?.closeListener()
                    server.tcp[index].value = nil
                }
            }
            _ = try? await loop.submit {
                for socket in sockets.value.0 { socket.close() }
                sockets.value.1?.close()
            }
            throw error
        }
        if let path = configuration.peerSnapshotPath {
            await server.keepPeerSnapshot(
                at: path, secret: secrets.statelessResetSecret, maxConnections: configuration.maxConnections)
        }
        return server
    }

    private static func parse(_ text: String) throws(TransportError) -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw TransportError(
                .invalidConfiguration,
                "cannot parse the listening address \(text); use HOST:PORT with a numeric host")
        }
        return address
    }

    /// Live connections, QUIC and TCP (including those still in the handshake or QUIC's closing period).
    public func connectionCount() async -> Int {
        await sumOverLoops { quic, tcp in (quic?.connectionCount ?? 0) + (tcp?.connectionCount ?? 0) }
    }

    /// Connections not closed yet, QUIC and TCP: a drain is done once every client left (its connection may still
    /// be in QUIC's closing period, 3 PTO, which a stalled path's RTT estimate stretches to seconds).
    func openConnectionCount() async -> Int {
        await sumOverLoops { quic, tcp in (quic?.openConnectionCount ?? 0) + (tcp?.openConnectionCount ?? 0) }
    }

    /// `count` of each loop's QUIC and TCP drivers, on that loop, added up.
    private func sumOverLoops(_ count: @escaping @Sendable (QUICServerDriver?, QMuxServerDriver?) -> Int) async -> Int {
        var sum = 0
        for (quic, tcp) in zip(quic, tcp) {
            sum += (try? await quic.loop.submit { count(quic.value, tcp.value) }) ?? 0
        }
        return sum
    }

    /// What the 0-RTT anti-replay store decided so far, over every event loop: early data accepted, replays
    /// refused, and (with ``AntiReplayBackend/redis(_:)``) attempts refused because Redis could not answer in time.
    public func antiReplayStatistics() async -> AntiReplayStatistics {
        if let redis = redisAntiReplay.withLock({ $0 }) { return AntiReplayStatistics(redis.snapshot) }
        // One store per server: the first loop's (with several loops, theirs is one shared object).
        let store = antiReplayStores[0]
        let counters = try? await store.loop.submit { store.value?.counters }
        return AntiReplayStatistics((counters ?? nil) ?? .zero)
    }

    /// Whether the shared anti-replay store has answered at least once (its memory marker was read); nil when none
    /// is configured. A relay whose store never answered refuses every 0-RTT attempt.
    package var antiReplayStoreAnswered: Bool? {
        redisAntiReplay.withLock { $0 }.map { !$0.belief.isEmpty }
    }

    /// The TCP listener's admission counters: pending handshakes, and connections refused or dropped to resist
    /// floods and descriptor exhaustion (all zero without a TCP listener).
    public func tcpAdmissionStatistics() async -> TCPAdmissionStatistics {
        var total = TCPAdmissionStatistics()
        for driver in tcp {
            guard let loop = try? await driver.loop.submit({ driver.value?.statistics }) ?? nil else { continue }
            total.pendingHandshakes = loop.pendingHandshakes  // server-wide already: the loops share the table
            total.refusedOverSourceBudget += loop.refusedOverSourceBudget
            total.refusedOverSourceLimits += loop.refusedOverSourceLimits
            total.evictedPendingHandshakes += loop.evictedPendingHandshakes
            total.refusedForDescriptors += loop.refusedForDescriptors
            total.acceptFailures += loop.acceptFailures
        }
        return total
    }

    /// Closes every connection with `code`, stops listening and ends `connections`.
    public func shutdown(code: UInt64 = 0) async {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        await peerSnapshot.withLock { $0 }?.stop()  // before the closes: every client is told by CONNECTION_CLOSE
        for (quic, tcp) in zip(quic, tcp) {
            _ = try? await quic.loop.submit {
                quic.value?.shutdown(code: code)
                tcp.value?.shutdown(code: code)
            }
        }
        // Let the CONNECTION_CLOSE packets leave before the loop stops.
        try? await Task.sleep(for: .milliseconds(20))
        for (quic, tcp) in zip(quic, tcp) {
            _ = try? await quic.loop.submit {
                quic.value?.closeSocket()
                quic.value = nil
                tcp.value?.closeListener()
                tcp.value = nil
            }
        }
        connectionMailbox.finish()
        if ownsLoops { for loop in loops { loop.shutdown() } }
    }

    deinit {
        let alreadyStopped = stopped.withLock { $0 }
        if !alreadyStopped {
            for (quic, tcp) in zip(quic, tcp) {
                quic.loop.execute {
                    quic.value?.shutdown(code: 0)
                    quic.value?.closeSocket()
                    quic.value = nil
                    tcp.value?.shutdown(code: 0)
                    tcp.value?.closeListener()
                    tcp.value = nil
                }
            }
            connectionMailbox.finish()
            if ownsLoops { for loop in loops { loop.shutdown() } }
        }
    }
}
