import TransportCore
import TransportIO

/// What the event loops of one server share, so the server behaves as one whatever the number of loops: the
/// count of live connections (`maxConnections`, `retryAboveConnections`), the per-source ledger, and the 0-RTT
/// anti-replay store (a first flight replayed to another loop is refused too). With one loop the ledger and the
/// store stay the loop's own; the count is always the server's, QUIC and TCP together (see `load`). With a Redis
/// store (`AntiReplayBackend.redis`) each loop has its own connection to it, and the loops share its counters and
/// budget (`redis`).
///
/// A worker of `serve --workers N` counts in the memory its supervisor shares with every worker (`relayWide`): the
/// connection count, both per-source ledgers, the TCP handshakes pending per source and the 0-RTT budget's grants
/// are then the relay's, whatever worker the kernel gave a connection (issue 31, item 10).
final class SharedServerState: Sendable {
    let loops: Int
    /// A worker's place in its parent's socket group (nil: this process binds its own sockets).
    let inherited: InheritedSockets?
    /// What the workers of the relay count together (nil: not a worker, or an old supervisor's worker).
    let relayWide: RelayWideState?
    /// The fleet's store, when configured and early data is enabled.
    let redis: RedisAntiReplayShared?
    /// Live connections over both paths: QUIC drivers and the TCP listener (`SharedTCPAdmission`) count into it, so
    /// `maxConnections` is one budget for the server, not one per path (issue 21, item 16: TCP connections filled
    /// `--max-connections` while QUIC still accepted as many again).
    let load: ServerLoad
    let antiReplayStore: AntiReplayStore?
    private let sourceLedger: (any SourceAdmission & Sendable)?

    /// - Throws: `unreachable` when the Redis host does not resolve; `invalidConfiguration` when a worker's
    ///   relay-wide memory cannot be mapped.
    init(configuration: ServerConfiguration, loops: Int) throws(TransportError) {
        self.loops = loops
        inherited = configuration.inheritedSockets
        relayWide = try inherited?.relayWide.map { share throws(TransportError) in
            try RelayWideState(descriptor: share.descriptor, worker: share.worker, adopting: true)
        }
        load = ServerLoad(relayWide: relayWide)
        let earlyData = configuration.earlyData
        // The budget's grants: the relay's when its workers share them, else this process's (Redis: a budget per
        // relay; in process: the store's own count of its entries).
        var grants: ZeroRTTGrantCounterMaker?
        if let relayWide {
            grants = { capacity, window in
                RelayWideZeroRTTGrants(state: relayWide, capacity: capacity, windowMilliseconds: window)
            }
        }
        if case .redis(let store) = configuration.antiReplay, earlyData.isEnabled {
            let endpoint = RedisStoreEndpoint(
                host: store.host, port: store.port, database: store.database,
                deadline: store.deadline.nanoseconds, keyPrefix: store.keyPrefix,
                clockSkewAllowance: Int64(store.clockSkewAllowance.nanoseconds / 1_000_000),
                username: store.username, password: store.password)
            let tls = try store.redisTLS()
            redis = RedisAntiReplayShared(
                endpoint: endpoint, capacity: earlyData.antiReplayCapacity, windowSeconds: earlyData.windowSeconds,
                grants: grants, tls: tls)
        } else {
            redis = nil
        }
        if redis == nil, loops > 1 || grants != nil {  // with Redis the loops use their clients of it instead
            // A bare mutex, not a `Locked(())`: ThreadSanitizer took the empty value's inout access for a race.
            let lock = PThreadMutex()
            antiReplayStore = AntiReplayStore(
                capacity: earlyData.antiReplayCapacity, windowSeconds: earlyData.windowSeconds,
                serialize: { body in lock.withLock { body() } }, grants: grants)
        } else {
            antiReplayStore = nil
        }
        if let relayWide, let limits = configuration.perSourceLimits {
            sourceLedger = RelayWideSourceAdmission(state: relayWide, ledger: .quic, limits: limits.core)
        } else if loops > 1, let limits = configuration.perSourceLimits {
            sourceLedger = SharedSourceLedger(SourceLedger(limits: limits.core))
        } else {
            sourceLedger = nil
        }
    }

    /// On `loop`'s thread: the anti-replay store its TLS context uses (nil: the context makes its own). With Redis,
    /// the loop's own client of the fleet's store, which connects at once.
    func zeroRTTAdmission(loop: EventLoop) -> (any ZeroRTTAdmission)? {
        if let redis { return RedisAntiReplay(shared: redis, loop: loop) }
        return antiReplayStore
    }

    /// Loop `index`'s thread: makes `endpoint` count connections server-wide (both paths), issue connection IDs
    /// following `quicLB` (when set) and, with several loops, naming loop `index`, and charge sources server-wide.
    func share(with endpoint: QUICServerEndpoint, loop index: Int, quicLB: QUICLBConfiguration?) throws(TransportError)
    {
        let load = self.load
        endpoint.serverConnectionCount = { load.connections }
        // A worker's loops are a slice of the parent's group: IDs name the loop's place in the whole group.
        let (first, total) = inherited.map { ($0.firstLoop, $0.totalLoops) } ?? (0, loops)
        let steering = total > 1 ? ConnectionIDSteering(index: first + index, count: total) : nil
        if steering != nil || quicLB != nil { try endpoint.issueConnectionIDs(steering: steering, quicLB: quicLB) }
        endpoint.shareSourceLedger(sourceLedger)
    }
}

/// The live connections of a server, over all its loops: QUIC ones and TCP ones (pending handshakes included); in a
/// worker of `serve --workers`, over every worker of the relay (`RelayWideState`).
final class ServerLoad: Sendable {
    private let count = Locked(0)
    private let relayWide: RelayWideState?

    init(relayWide: RelayWideState? = nil) { self.relayWide = relayWide }

    /// The server's live connections (the relay's, in a worker).
    var connections: Int { relayWide?.connections ?? count.withLock { $0 } }

    func add(_ delta: Int) {
        count.withLock { $0 += delta }
        relayWide?.addConnections(delta)
    }
}

/// A `SourceLedger` that every loop of a server charges, under a lock.
final class SharedSourceLedger: SourceAdmission, Sendable {
    private let ledger: Locked<SourceLedger>

    init(_ ledger: SourceLedger) { self.ledger = Locked(ledger) }

    var trackedSources: Int { ledger.withLock { $0.trackedSources } }

    func admit(_ source: SocketAddress, validated: Bool, now: UInt64) -> SourceLedger.Admission {
        ledger.withLock { $0.admit(source, validated: validated, now: now) }
    }

    func release(_ charge: SourceLedger.Charge, now: UInt64) { ledger.withLock { $0.release(charge, now: now) } }
}

/// A loop's place among the server's QUIC drivers: where to hand a packet that belongs to another loop.
struct ServerLoopGroup: Sendable {
    let index: Int
    let drivers: [LoopBound<QUICServerDriver?>]
    /// A worker's loops in its parent's socket group: `firstLoop + index` is this loop's place there.
    var firstLoop = 0
    var totalLoops: Int

    init(index: Int, drivers: [LoopBound<QUICServerDriver?>], inherited: InheritedSockets?) {
        self.index = index
        self.drivers = drivers
        firstLoop = inherited?.firstLoop ?? 0
        totalLoops = inherited?.totalLoops ?? drivers.count
    }
}

/// What the TCP drivers of a server's loops share, so that admission holds per server whichever loop runs a
/// connection: the pending handshakes (budget per source, overall cap, eviction wherever the victim is pending),
/// the live connection count (`maxConnections`, the server's, shared with QUIC) and the per-source ledger.
final class SharedTCPAdmission: Sendable {
    /// A connection: the loop it runs on and the number the accepting driver gave it.
    struct Key: Hashable, Sendable {
        let loop: Int
        let serial: UInt64
    }

    let pending: Locked<PendingHandshakes<Key>>
    /// The server's connection count (`SharedServerState.load`), QUIC connections included.
    let load: ServerLoad
    let ledger: (any SourceAdmission & Sendable)?
    /// Each loop's TCP driver: where the accepting driver deals connections and drops evicted handshakes.
    let drivers: [LoopBound<QMuxServerDriver?>]
    /// In a worker: the relay's memory, where the handshakes pending per source and the TCP ledger are counted over
    /// every worker (the overall cap, `maxPendingTCPHandshakes`, bounds this process's memory and stays its own).
    private let relayWide: RelayWideState?
    private let perSourcePending: Int

    init(
        configuration: ServerConfiguration, drivers: [LoopBound<QMuxServerDriver?>], load: ServerLoad,
        relayWide: RelayWideState? = nil
    ) {
        self.load = load
        self.relayWide = relayWide
        perSourcePending = configuration.maxPendingTCPHandshakesPerSource
        pending = Locked(
            PendingHandshakes(
                limit: configuration.maxPendingTCPHandshakes,
                perSource: configuration.maxPendingTCPHandshakesPerSource))
        ledger = configuration.perSourceLimits.map { limits -> any SourceAdmission & Sendable in
            if let relayWide { return RelayWideSourceAdmission(state: relayWide, ledger: .tcp, limits: limits.core) }
            return SharedSourceLedger(SourceLedger(limits: limits.core))
        }
        self.drivers = drivers
    }

    /// A connection admitted as `key` is gone (or never started): its pending entry, its place in the count and
    /// its source's charge are released.
    func forget(_ key: Key, charge: SourceLedger.Charge?) {
        removePending(key)
        load.add(-1)
        if let charge { ledger?.release(charge, now: MonotonicClock.now()) }
    }

    /// A handshake from `source` may start as far as the relay's other workers are concerned: its source has fewer
    /// than `maxPendingTCPHandshakesPerSource` pending over all of them (counted until `removePending`). Always
    /// true outside a worker (the table of this process is the relay's).
    func acquirePending(from source: PendingHandshakes<Key>.Source) -> Bool {
        relayWide?.acquirePending(source, perSource: perSourcePending, now: MonotonicClock.now()) ?? true
    }

    /// Gives back what `acquirePending` took for a connection that did not start after all.
    func releaseAcquired(from source: PendingHandshakes<Key>.Source) {
        relayWide?.releasePending(source, now: MonotonicClock.now())
    }

    /// `key`'s handshake is no longer pending (ready, failed, evicted, closed): out of the table and, in a worker,
    /// out of its source's relay-wide count. No-op when it was not pending.
    func removePending(_ key: Key) {
        guard let source = pending.withLock({ $0.remove(key) }) else { return }
        releaseAcquired(from: source)
    }
}
