internal import CTransportShims
import Glibc
import TransportCore

/// What the worker processes of one relay (`ptt-transport serve --workers N`) count together, so that the relay's
/// limits hold for the relay and not for each worker: live connections (`maxConnections`, `retryAboveConnections`),
/// the per-source ledgers of QUIC and TCP, the TCP handshakes pending per source, and the 0-RTT budget's grants.
///
/// The supervisor creates the memory (`create`, a sealed memfd) and passes its descriptor down with the sockets; each
/// worker maps it (`init(descriptor:worker:)`). Every count is kept per worker, so the supervisor gives back what a
/// dead worker held (`releaseWorker`) before starting it again. Live connection counts are atomics; the rest sits
/// behind one process-shared robust mutex, so a worker that dies holding it wedges no one (see `ptt_relay_shared.h`).
/// An event loop holds that lock only for a table lookup, as it holds the in-process ledger's.
package final class RelayWideState: @unchecked Sendable {
    // @unchecked Sendable invariant: `region` is a MAP_SHARED mapping that lives until deinit; every access is a C
    // call that takes the region's process-shared lock or uses atomics.
    private let region: OpaquePointer
    /// This process's place among the workers (its counts; the supervisor's own mapping charges nothing).
    package let worker: Int
    /// The workers the region counts for.
    package let workers: Int

    /// What a region is made for.
    package struct Sizing: Sendable, Equatable {
        /// Worker processes, 1 to 64.
        package var workers: Int
        /// Sources tracked at once at most (an IPv4 address or an IPv6 /64): what the relay's connections and
        /// pending handshakes can come from, with room for those whose buckets are still refilling.
        package var sources: Int
        /// The 0-RTT budget's capacity: grants per window.
        package var zeroRTTGrants: Int

        package init(workers: Int, sources: Int, zeroRTTGrants: Int) {
            self.workers = workers
            self.sources = sources
            self.zeroRTTGrants = zeroRTTGrants
        }

        /// For a relay of `workers` processes holding at most `maxConnections` connections and each
        /// `maxPendingTCPHandshakes` pending handshakes: every one may come from another source, twice over (sources
        /// that closed their last connection stay until their bucket is full again).
        package init(workers: Int, maxConnections: Int, maxPendingTCPHandshakes: Int, zeroRTTGrants: Int) {
            let sources = 2 * (max(0, maxConnections) + workers * max(0, maxPendingTCPHandshakes))
            self.init(workers: workers, sources: min(max(sources, 1024), 1 << 20), zeroRTTGrants: zeroRTTGrants)
        }
    }

    /// The supervisor: makes a region (zeroed) and returns its descriptor, close-on-exec (pass it to each worker
    /// as it starts; keep it open while workers run).
    ///
    /// - Throws: `invalidConfiguration` for a sizing out of range (workers 1–64, sources up to 2^20, grants up to
    ///   2^26); `systemCallFailed` when the kernel refuses the memory.
    package static func create(_ sizing: Sizing) throws(TransportError) -> Int32 {
        guard (1...Int(PTT_RELAY_MAX_WORKERS)).contains(sizing.workers), (1...(1 << 20)).contains(sizing.sources),
            (1...(1 << 26)).contains(sizing.zeroRTTGrants)
        else {
            throw TransportError(
                .invalidConfiguration,
                "relay-wide state for \(sizing.workers) workers, \(sizing.sources) sources and "
                    + "\(sizing.zeroRTTGrants) 0-RTT grants is out of range (1–64 workers, up to 1,048,576 sources "
                    + "and 67,108,864 grants); lower --max-connections or --zero-rtt-tickets")
        }
        var config = ptt_relay_shared_config(
            workers: UInt32(sizing.workers), sources: UInt32(sizing.sources),
            grant_capacity: UInt32(sizing.zeroRTTGrants))
        let fd = ptt_relay_shared_create(&config)
        guard fd >= 0 else {
            throw TransportError(
                .systemCallFailed, "creating the workers' shared memory: \(errnoDescription(-fd))")
        }
        return fd
    }

    /// Maps the region behind `descriptor` (made by `create`) as worker `worker`. `adopting`: the descriptor was
    /// inherited for this mapping alone and is closed once mapped (the mapping outlives it), so no child of the
    /// worker inherits it; otherwise it stays the caller's.
    ///
    /// - Throws: `invalidConfiguration` when the descriptor holds no such region or `worker` is not one of its
    ///   workers (a `--worker-sockets` argument not written by the supervisor).
    package init(descriptor: Int32, worker: Int, adopting: Bool = false) throws(TransportError) {
        var error: Int32 = 0
        let mapped = ptt_relay_shared_map(descriptor, &error)
        if adopting, mapped != nil { close(descriptor) }
        guard let region = mapped else {
            throw TransportError(
                .invalidConfiguration,
                "descriptor \(descriptor) holds no relay-wide state (\(errnoDescription(-error))); "
                    + "--worker-sockets is for the workers `serve --workers` starts")
        }
        let workers = Int(ptt_relay_shared_workers(region))
        guard (0..<workers).contains(worker) else {
            ptt_relay_shared_unmap(region)
            throw TransportError(
                .invalidConfiguration, "worker \(worker) is not one of the relay's \(workers) workers")
        }
        self.region = region
        self.worker = worker
        self.workers = workers
    }

    deinit { ptt_relay_shared_unmap(region) }

    // MARK: - Connections

    /// Live connections of every worker.
    package var connections: Int { Int(ptt_relay_shared_connections(region)) }

    /// This worker's live connections change by `delta`.
    package func addConnections(_ delta: Int) {
        ptt_relay_shared_add_connections(region, UInt32(worker), Int64(delta))
    }

    /// The supervisor: worker `index` is gone; its connections, its sources' counts and its pending handshakes are
    /// given back (call before starting it again).
    package func releaseWorker(_ index: Int) {
        guard (0..<workers).contains(index) else { return }
        ptt_relay_shared_release_worker(region, UInt32(index))
    }

    // MARK: - TCP handshakes pending

    /// A TCP handshake from `source` starts: false when the source has `perSource` pending over all workers.
    package func acquirePending(_ source: SourceLedger.Key, perSource: Int, now: UInt64) -> Bool {
        ptt_relay_shared_acquire_pending(
            region, UInt32(worker), source.high, source.low, UInt32(clamping: max(0, perSource)), now) == 1
    }

    /// A handshake `acquirePending` admitted from `source` ended.
    package func releasePending(_ source: SourceLedger.Key, now: UInt64) {
        ptt_relay_shared_release_pending(region, UInt32(worker), source.high, source.low, now)
    }

    /// TCP handshakes pending from `source` over all workers.
    package func pending(from source: SourceLedger.Key) -> Int {
        Int(ptt_relay_shared_pending(region, source.high, source.low))
    }

    /// Sources tracked now (ledgers and pending handshakes together).
    package var trackedSources: Int { Int(ptt_relay_shared_tracked_sources(region)) }

    // MARK: - Sources and grants (through `RelayWideSourceAdmission` and `RelayWideZeroRTTGrants`)

    fileprivate func admit(
        _ key: SourceLedger.Key, account: Int, limits: SourceLimits, now: UInt64
    ) -> SourceLedger.Admission {
        var cLimits = ptt_source_limits(
            max_live: UInt32(clamping: limits.maxLive), per_second: UInt32(clamping: limits.perSecond),
            burst: UInt32(clamping: limits.burst))
        let result = ptt_relay_shared_admit_source(
            region, UInt32(worker), key.high, key.low, UInt32(account), &cLimits, now)
        switch Int(result) {
        case Int(PTT_SOURCE_ADMITTED): return .admitted(SourceLedger.Charge(key: key, validated: account % 2 == 1))
        case Int(PTT_SOURCE_TOO_FAST): return .refused(.tooFast)
        default: return .refused(.tooManyLive)  // over the live cap, or no room to track another source
        }
    }

    fileprivate func release(_ key: SourceLedger.Key, account: Int, now: UInt64) {
        ptt_relay_shared_release_source(region, UInt32(worker), key.high, key.low, UInt32(account), now)
    }

    fileprivate func live(_ key: SourceLedger.Key, account: Int) -> Int {
        Int(ptt_relay_shared_live(region, key.high, key.low, UInt32(account)))
    }

    fileprivate func takeGrant(now: Int64, window: Int64) -> Bool {
        ptt_relay_shared_take_grant(region, now, window) == 1
    }

    fileprivate func giveBackGrant() { ptt_relay_shared_give_back_grant(region) }

    fileprivate func grantsUsed(now: Int64) -> Int { Int(ptt_relay_shared_grants_used(region, now)) }
}

/// A server's per-source ledger (QUIC's or TCP's, which stay apart as they do in one process) kept for the whole
/// relay in `RelayWideState`: the same accounts and limits as `SourceLedger`, counted over every worker.
package final class RelayWideSourceAdmission: SourceAdmission, Sendable {
    /// Which of a server's two ledgers.
    package enum Ledger: Int, Sendable {
        case quic = 0
        case tcp = 1
    }

    private let state: RelayWideState
    private let ledger: Ledger
    private let limits: SourceLimits

    package init(state: RelayWideState, ledger: Ledger, limits: SourceLimits) {
        self.state = state
        self.ledger = ledger
        self.limits = limits
    }

    package var trackedSources: Int { state.trackedSources }

    private func account(validated: Bool) -> Int { ledger.rawValue * 2 + (validated ? 1 : 0) }

    package func admit(_ source: SocketAddress, validated: Bool, now: UInt64) -> SourceLedger.Admission {
        state.admit(SourceLedger.Key(source), account: account(validated: validated), limits: limits, now: now)
    }

    package func release(_ charge: SourceLedger.Charge, now: UInt64) {
        state.release(charge.key, account: account(validated: charge.validated), now: now)
    }

    /// Live connections from `source` in one account, over every worker.
    package func live(from source: SocketAddress, validated: Bool) -> Int {
        state.live(SourceLedger.Key(source), account: account(validated: validated))
    }
}

/// The 0-RTT budget's grants counted in `RelayWideState`: one budget for all the relay's workers.
package final class RelayWideZeroRTTGrants: ZeroRTTGrantCounter {
    private let state: RelayWideState
    private let window: Int64
    package let capacity: Int

    /// Grants that count `windowMilliseconds` each, up to the region's capacity (made with `Sizing.zeroRTTGrants`).
    package init(state: RelayWideState, capacity: Int, windowMilliseconds: Int64) {
        self.state = state
        self.capacity = capacity
        window = max(1, windowMilliseconds)
    }

    package func take(now: Int64) -> Bool { state.takeGrant(now: now, window: window) }

    package func giveBack() { state.giveBackGrant() }

    package func used(now: Int64) -> Int { state.grantsUsed(now: now) }
}
