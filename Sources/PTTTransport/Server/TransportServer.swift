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
    /// Connections whose client chose one of ``ServerConfiguration/additionalALPNs``, once their handshake
    /// completed, in order (empty, and finished at `shutdown`, without additional protocols).
    public let additionalConnections: IncomingConnections
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
    let connectionMailbox: Mailbox<TransportConnection>
    /// The hook for 0-RTT first flights' streams, run on the loop as they arrive (see `EarlyStreamTap`).
    package let earlyStreams = EarlyStreamTap()
    let additionalMailbox = Mailbox<TransportConnection>()
    /// The configuration's `additionalALPNs`: what arrives on `additionalConnections`.
    package let additionalALPNs: [String]
    private let stopped = Locked(false)
    /// The peer snapshot this server keeps (`ServerConfiguration.peerSnapshotFile`), once bound.
    let peerSnapshot = Locked<PeerSnapshotKeeper?>(nil)
    /// What this relay sent its previous run's clients at start, when it found a peer snapshot.
    package let restartResets = Locked<RestartResetReport?>(nil)
    /// The fleet's anti-replay store, when configured (set once, while binding).
    let redisAntiReplay = Locked<RedisAntiReplayShared?>(nil)
    /// The ticket key the server was bound with (random for the process when no file is configured).
    let processTicketKey = Locked<[UInt8]>([])
    /// Whether `drain` began.
    package let draining = Locked(false)
    /// Reloads (``reload(configuration:)``) that took effect, and those that failed and changed nothing.
    package let reloads = Locked((succeeded: UInt64(0), failed: UInt64(0)))
    /// Whether the configuration enables early data (after the GnuTLS safety check).
    package let earlyDataEnabled: Bool
    /// Whether `shutdown` stops the loops (false for a server bound on another server's loop).
    private let ownsLoops: Bool

    init(
        loops: [EventLoop], steering: ReuseportGroup.Steering, quicAddress: ServerAddress?, tcpAddress: ServerAddress?,
        connections: Mailbox<TransportConnection>, zeroRTTRefusal: String?, earlyDataEnabled: Bool, ownsLoops: Bool,
        additionalALPNs: [String] = []
    ) {
        self.additionalALPNs = quicAddress == nil ? [] : additionalALPNs
        self.ownsLoops = ownsLoops
        self.earlyDataEnabled = earlyDataEnabled
        self.loop = loops[0]
        self.loops = loops
        self.steering = steering
        self.zeroRTTRefusal = zeroRTTRefusal
        self.quicAddress = quicAddress
        self.tcpAddress = tcpAddress
        self.connections = IncomingConnections(base: connections)
        self.additionalConnections = IncomingConnections(base: additionalMailbox)
        self.connectionMailbox = connections
        self.quic = loops.map { LoopBound(nil, loop: $0) }
        self.tcp = loops.map { LoopBound(nil, loop: $0) }
        self.antiReplayStores = loops.map { LoopBound(nil, loop: $0) }
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

    /// Why the shared anti-replay store cannot be used, when a connection failed in a way an operator fixes (TLS
    /// verification, a plain port on a `rediss://` URL or the reverse, AUTH refused): nil while it answers, or
    /// without one.
    package var antiReplayStoreError: TransportError? { redisAntiReplay.withLock { $0 }?.storeError }

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
        additionalMailbox.finish()
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
            additionalMailbox.finish()
            if ownsLoops { for loop in loops { loop.shutdown() } }
        }
    }
}
