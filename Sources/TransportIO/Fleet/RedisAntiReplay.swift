import Glibc
import TransportCore

/// Where a fleet's shared 0-RTT anti-replay store is, and how long a handshake may wait for it.
package struct RedisStoreEndpoint: Hashable, Sendable {
    package var host: String
    package var port: UInt16
    package var database: Int
    /// How long one 0-RTT attempt may wait for Redis, in nanoseconds: past it the early data is refused.
    package var deadline: UInt64
    /// Prepended to every key, so several fleets (or other data) can share one Redis.
    package var keyPrefix: String

    package init(host: String, port: UInt16, database: Int, deadline: UInt64, keyPrefix: String) {
        self.host = host
        self.port = port
        self.database = database
        self.deadline = deadline
        self.keyPrefix = keyPrefix
    }
}

/// What the loops of one server share about the Redis store: the counters and the budget of keys this relay may
/// create per window (`ZeroRTTBudget`).
package final class RedisAntiReplayShared: Sendable {
    package let endpoint: RedisStoreEndpoint
    /// The addresses `endpoint.host` resolved to when the server started.
    package let addresses: [SocketAddress]
    /// How long after issue a ticket may carry 0-RTT, in seconds.
    package let window: Int64
    /// How long a key lives: the window plus `clockSkewAllowance`.
    package let keyLifetimeMilliseconds: Int64
    fileprivate let counters = Locked(AntiReplayCounters())
    fileprivate let budget: Locked<ZeroRTTBudget>

    /// Clocks of the relays of a fleet may differ by this much (seconds) without a replay getting through: a
    /// key outlives the window by it (see `RedisAntiReplay`).
    package static let clockSkewAllowance: Int64 = 60

    /// - Parameters:
    ///   - capacity: the most keys this relay creates within one window (its share of the store's memory).
    ///   - windowSeconds: how long after issue a ticket may carry 0-RTT.
    /// - Throws: `unreachable` when the host does not resolve.
    package init(endpoint: RedisStoreEndpoint, capacity: Int, windowSeconds: Int64) throws(TransportError) {
        self.endpoint = endpoint
        addresses = try AddressResolver.resolve(host: endpoint.host, port: endpoint.port)
        window = max(1, windowSeconds)
        keyLifetimeMilliseconds = (window + Self.clockSkewAllowance) * 1000
        budget = Locked(ZeroRTTBudget(capacity: capacity, windowMilliseconds: keyLifetimeMilliseconds))
    }

    /// The counters of every loop of the server.
    package var snapshot: AntiReplayCounters { counters.withLock { $0 } }
}

/// One event loop's client of the fleet's anti-replay store on Redis: one atomic `SET key 1 NX PX ms` per 0-RTT
/// attempt, key = prefix ‖ hex(first 128 bits of the ticket's SHA-256). The reply `OK` means no relay of the fleet
/// accepted this ticket's early data before: accepted; a null reply means one did: a replay, refused.
///
/// Fail closed: no reply within the deadline (unreachable, slow, restarting), an error reply (e.g. `OOM` when
/// `maxmemory` is reached) or bytes that are not RESP refuse the early data — the handshake goes on in 1-RTT —
/// and count as `unavailable`; the connection reconnects with backoff, so 0-RTT comes back by itself.
///
/// Why no replay gets through: GnuTLS accepts early data only for tickets younger than the window (the context's
/// recording start is kept one window back, see `GnuTLSAntiReplay`), and a ticket's key is created when its early
/// data is first accepted, so after the ticket was issued, and lives one window plus `clockSkewAllowance`: it
/// outlives the ticket's 0-RTT wherever the ticket is presented, as long as the relays' clocks agree within the
/// allowance. Losing keys (a failover to a replica that had not received them, a flush) is the one way a replay
/// could be accepted; see the production guide for the settings that rule it out.
///
/// Bound: a relay asks Redis to create at most `capacity` keys per window (the budget, counted per relay;
/// attempts beyond it are refused without asking and count as `overBudget`), so a fleet of N relays holds at
/// most N × capacity keys, about 100 bytes each in Redis, whatever strangers do.
package final class RedisAntiReplay: ZeroRTTAdmission {
    private let shared: RedisAntiReplayShared
    private let connection: RedisConnection

    package init(shared: RedisAntiReplayShared) {
        self.shared = shared
        connection = RedisConnection(addresses: shared.addresses, database: shared.endpoint.database)
    }

    package var window: Int64 { shared.window }
    package var outlivesProcess: Bool { true }
    package var counters: AntiReplayCounters { shared.snapshot }

    /// Nothing to record: a ticket's use is recorded when its early data is first offered.
    package func issue(_ ticket: TicketDigest) -> Bool { true }

    package func redeem(_ ticket: TicketDigest) -> Bool {
        let start = MonotonicClock.now()
        guard shared.budget.withLock({ $0.take(now: Int64(start / 1_000_000)) }) else {
            count(\.overBudget)
            return false
        }
        let key = shared.endpoint.keyPrefix + ticket.hex
        let command = ["SET", key, "1", "NX", "PX", String(shared.keyLifetimeMilliseconds)]
        let reply = try? connection.call([command], deadline: start + shared.endpoint.deadline).first
        switch reply {
        case .simpleString("OK")?:
            count(\.accepted)
            return true
        case .bulk(nil)?:
            count(\.duplicates)
            return false
        default:
            count(\.unavailable)
            return false
        }
    }

    private func count(_ counter: WritableKeyPath<AntiReplayCounters, UInt64>) {
        shared.counters.withLock { $0[keyPath: counter] += 1 }
    }
}
