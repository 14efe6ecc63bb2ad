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
    /// How far apart the clocks of the fleet's relays may be, in milliseconds, without a replay getting through.
    package var clockSkewAllowance: Int64

    package init(
        host: String, port: UInt16, database: Int, deadline: UInt64, keyPrefix: String, clockSkewAllowance: Int64
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.deadline = deadline
        self.keyPrefix = keyPrefix
        self.clockSkewAllowance = max(0, clockSkewAllowance)
    }
}

/// What the loops of one server share about the Redis store: the counters, the budget of keys this relay may
/// create per window (`ZeroRTTBudget`), and since when the store remembers (`RedisMemoryMarker`).
package final class RedisAntiReplayShared: Sendable {
    package let endpoint: RedisStoreEndpoint
    /// The addresses `endpoint.host` resolved to when the server started.
    package let addresses: [SocketAddress]
    /// How long after issue a ticket may carry 0-RTT, in seconds.
    package let window: Int64
    /// How long a key lives: the window plus the clock-skew allowance, in milliseconds.
    package let keyLifetimeMilliseconds: Int64
    fileprivate let counters = Locked(AntiReplayCounters.zero)
    /// The budget's grants: this relay's (`LocalZeroRTTGrants`), or shared by the relay's worker processes.
    fileprivate let budget: any ZeroRTTGrantCounter
    /// Unix seconds from which tickets are known to be remembered (nil until a loop or `init` read the marker).
    fileprivate let memoryStart = Locked<Int64?>(nil)

    /// Resolves the host and, when Redis answers within `startupDeadline`, reads (or writes) its memory marker, so
    /// tickets issued from now on can carry 0-RTT at once; unreachable, the loops try again on their first 0-RTT
    /// attempts.
    ///
    /// - Parameters:
    ///   - capacity: the most keys this relay creates within one window (its share of the store's memory).
    ///   - windowSeconds: how long after issue a ticket may carry 0-RTT.
    ///   - grants: makes the counter of the budget's grants (given the capacity and a key's lifetime in ms; taken
    ///     at monotonic ms) when it is not this process's alone: the relay's workers share one (nil: a
    ///     `LocalZeroRTTGrants`).
    /// - Throws: `unreachable` when the host does not resolve.
    package init(
        endpoint: RedisStoreEndpoint, capacity: Int, windowSeconds: Int64, startupDeadline: UInt64 = 1_000_000_000,
        grants: ZeroRTTGrantCounterMaker? = nil
    ) throws(TransportError) {
        self.endpoint = endpoint
        addresses = try AddressResolver.resolve(host: endpoint.host, port: endpoint.port)
        window = max(1, windowSeconds)
        keyLifetimeMilliseconds = window * 1000 + endpoint.clockSkewAllowance
        budget = (grants ?? LocalZeroRTTGrants.init)(capacity, keyLifetimeMilliseconds)
        let connection = RedisConnection(addresses: addresses, database: endpoint.database)
        if let start = try? RedisMemoryMarker.establish(
            on: connection, prefix: endpoint.keyPrefix, deadline: MonotonicClock.now() + startupDeadline)
        {
            remember(markerMilliseconds: start)
        }
    }

    /// The counters of every loop of the server.
    package var snapshot: AntiReplayCounters { counters.withLock { $0 } }

    /// Since when the store remembers every ticket used (unix seconds), as far as this relay knows.
    package var rememberedSince: Int64? { memoryStart.withLock { $0 } }

    /// A marker read or written: tickets created before it plus the allowance may have been used unrecorded.
    fileprivate func remember(markerMilliseconds: Int64) {
        let milliseconds = markerMilliseconds + endpoint.clockSkewAllowance
        let seconds = (milliseconds + 999) / 1000  // GnuTLS' start is set in whole seconds: round up
        memoryStart.withLock { $0 = max($0 ?? seconds, seconds) }
    }
}

/// One event loop's client of the fleet's anti-replay store on Redis: one atomic `SET key 1 NX PX ms` per 0-RTT
/// attempt, key = prefix ‖ hex(first 128 bits of the ticket's SHA-256). The reply `OK` means no relay of the fleet
/// accepted this ticket's early data before: accepted; a null reply means one did: a replay, refused.
///
/// Fail closed: no reply within the deadline (unreachable, slow, restarting), an error reply (e.g. `OOM` when
/// `maxmemory` is reached, `READONLY` from a demoted primary) or bytes that are not RESP refuse the early data —
/// the handshake goes on in 1-RTT — and count as `unavailable`; the connection reconnects with backoff, so 0-RTT
/// comes back by itself.
///
/// Why no replay gets through: GnuTLS accepts early data only for tickets younger than the window and younger
/// than the store's memory (the context's recording start, see `GnuTLSAntiReplay` and `RedisMemoryMarker`), and a
/// ticket's key is created when its early data is first accepted, so after the ticket was issued, and lives one
/// window plus the clock-skew allowance: it outlives the ticket's 0-RTT wherever the ticket is presented, as long
/// as the relays' clocks agree within the allowance. A Redis that may have lost keys (any restart, a failover) shows
/// a missing marker or another run ID on the next connection: tickets issued before are refused 0-RTT.
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
    package var rememberedSince: Int64? { shared.rememberedSince }
    package var counters: AntiReplayCounters { shared.snapshot }

    /// Nothing to record: a ticket's use is recorded when its early data is first offered.
    package func issue(_ ticket: TicketDigest) -> Bool { true }

    package func redeem(_ ticket: TicketDigest, recordingStart: Int64) -> Bool {
        let start = MonotonicClock.now()
        guard shared.budget.take(now: Int64(start / 1_000_000)) else {
            count(\.overBudget)
            return false
        }
        let deadline = start + shared.endpoint.deadline
        let key = shared.endpoint.keyPrefix + ticket.hex
        let command = ["SET", key, "1", "NX", "PX", String(shared.keyLifetimeMilliseconds)]
        for attempt in 0..<2 {
            let reused = connection.isConnected
            do throws(TransportError) {
                if !reused {
                    let marker = try RedisMemoryMarker.establish(
                        on: connection, prefix: shared.endpoint.keyPrefix, deadline: deadline)
                    shared.remember(markerMilliseconds: marker)
                }
                // The ticket may predate what the store remembers (GnuTLS checked it against an older start).
                guard let since = shared.rememberedSince, since <= recordingStart else {
                    count(\.unknown)
                    return false
                }
                switch try connection.call([command], deadline: deadline).first {
                case .simpleString("OK")?:
                    count(\.accepted)
                    return true
                case .bulk(nil)?:
                    count(\.duplicates)
                    return false
                default:
                    break  // an error reply (OOM, READONLY, ...): fail closed
                }
            } catch {
                // A kept connection may have been closed by a Redis that restarted since: one fresh try.
                guard reused, attempt == 0, MonotonicClock.now() < deadline else { break }
                connection.reconnectNow()
                continue
            }
            break
        }
        count(\.unavailable)
        return false
    }

    private func count(_ counter: WritableKeyPath<AntiReplayCounters, UInt64>) {
        shared.counters.withLock { $0[keyPath: counter] += 1 }
    }
}
