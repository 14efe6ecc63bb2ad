import TransportCore
import TransportIO

/// What the event loops of one server share, so the server behaves as one whatever the number of loops: the
/// count of live connections (`maxConnections`, `retryAboveConnections`), the per-source ledger, and the 0-RTT
/// anti-replay store (a first flight replayed to another loop is refused too). With one loop the ledger and the
/// store stay the loop's own; the count is always the server's, QUIC and TCP together (see `load`). With a Redis
/// store (`AntiReplayBackend.redis`) each loop has its own connection to it, and the loops share its counters and
/// budget (`redis`).
final class SharedServerState: Sendable {
    let loops: Int
    /// A worker's place in its parent's socket group (nil: this process binds its own sockets).
    let inherited: InheritedSockets?
    /// The fleet's store, when configured and early data is enabled.
    let redis: RedisAntiReplayShared?
    /// Live connections over both paths: QUIC drivers and the TCP listener (`SharedTCPAdmission`) count into it, so
    /// `maxConnections` is one budget for the server, not one per path (issue 21, item 16: TCP connections filled
    /// `--max-connections` while QUIC still accepted as many again).
    let load = ServerLoad()
    let antiReplayStore: AntiReplayStore?
    private let sourceLedger: SharedSourceLedger?

    /// - Throws: `unreachable` when the Redis host does not resolve.
    init(configuration: ServerConfiguration, loops: Int) throws(TransportError) {
        self.loops = loops
        inherited = configuration.inheritedSockets
        if case .redis(let store) = configuration.antiReplay, configuration.earlyData.isEnabled {
            let endpoint = RedisStoreEndpoint(
                host: store.host, port: store.port, database: store.database,
                deadline: store.deadline.nanoseconds, keyPrefix: store.keyPrefix,
                clockSkewAllowance: Int64(store.clockSkewAllowance.nanoseconds / 1_000_000))
            redis = try RedisAntiReplayShared(
                endpoint: endpoint, capacity: configuration.earlyData.antiReplayCapacity,
                windowSeconds: configuration.earlyData.windowSeconds)
        } else {
            redis = nil
        }
        guard loops > 1 else {
            antiReplayStore = nil
            sourceLedger = nil
            return
        }
        // A bare mutex, not a `Locked(())`: ThreadSanitizer took the empty value's inout access for a race.
        let lock = PThreadMutex()
        antiReplayStore = AntiReplayStore(
            capacity: configuration.earlyData.antiReplayCapacity,
            windowSeconds: configuration.earlyData.windowSeconds
        ) { body in lock.withLock { body() } }
        sourceLedger = configuration.perSourceLimits.map { SharedSourceLedger(SourceLedger(limits: $0.core)) }
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
        if steering != nil || quicLB != nil {
            endpoint.connectionIDs = try ConnectionIDIssuer(steering: steering, configuration: quicLB)
        }
        guard loops > 1 else { return }
        endpoint.shareSourceLedger(sourceLedger)
    }
}

/// The live connections of a server, over all its loops: QUIC ones and TCP ones (pending handshakes included).
final class ServerLoad: Sendable {
    private let count = Locked(0)

    var connections: Int { count.withLock { $0 } }

    func add(_ delta: Int) { count.withLock { $0 += delta } }
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

    init(configuration: ServerConfiguration, drivers: [LoopBound<QMuxServerDriver?>], load: ServerLoad) {
        self.load = load
        pending = Locked(
            PendingHandshakes(
                limit: configuration.maxPendingTCPHandshakes,
                perSource: configuration.maxPendingTCPHandshakesPerSource))
        ledger = configuration.perSourceLimits.map { SharedSourceLedger(SourceLedger(limits: $0.core)) }
        self.drivers = drivers
    }

    /// A connection admitted as `key` is gone (or never started): its pending entry, its place in the count and
    /// its source's charge are released.
    func forget(_ key: Key, charge: SourceLedger.Charge?) {
        pending.withLock { $0.remove(key) }
        load.add(-1)
        if let charge { ledger?.release(charge, now: MonotonicClock.now()) }
    }
}
