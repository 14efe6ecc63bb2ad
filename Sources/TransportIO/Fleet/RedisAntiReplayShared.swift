import Glibc
import TransportCore

/// Where a fleet's shared 0-RTT anti-replay store is, and how long a claim may wait for it.
package struct RedisStoreEndpoint: Hashable, Sendable {
    package var host: String
    package var port: UInt16
    package var database: Int
    /// How long one claim may wait for Redis' reply, in nanoseconds (its own round trip: a reconnect is never
    /// waited for): past it the early data is refused.
    package var deadline: UInt64
    /// Prepended to every key, so several fleets (or other data) can share one Redis.
    package var keyPrefix: String
    /// How far apart the clocks of the fleet's relays may be, in milliseconds, without a replay getting through.
    package var clockSkewAllowance: Int64
    /// `AUTH` on each connection: the ACL user (nil: the default one) and the password (nil: no `AUTH`).
    package var username: String?
    package var password: String?

    /// The `AUTH` command of this endpoint, or nil without a password.
    package var authCommand: [String]? { password.map { ["AUTH"] + (username.map { [$0] } ?? []) + [$0] } }

    package init(
        host: String, port: UInt16, database: Int, deadline: UInt64, keyPrefix: String, clockSkewAllowance: Int64,
        username: String? = nil, password: String? = nil
    ) {
        self.username = username
        self.password = password
        self.host = host
        self.port = port
        self.database = database
        self.deadline = deadline
        self.keyPrefix = keyPrefix
        self.clockSkewAllowance = max(0, clockSkewAllowance)
    }
}

/// What the loops of one server share about the Redis store, under one lock: the counters, the budget of claims
/// this relay may make per window (`ZeroRTTBudget`, refunded for claims that created nothing), the tickets it
/// claimed lately (`RecentTickets`: a replay of one is refused without asking), and its belief about the store's
/// memory (the marker it last saw, see `RedisClaimScript`) with since when tickets are known to be remembered.
package final class RedisAntiReplayShared: Sendable {
    package let endpoint: RedisStoreEndpoint
    /// The addresses of `endpoint.host`, resolved again on every reconnect.
    package let addressBook: RedisAddressBook
    /// TLS on every connection to the store (`rediss://`; nil: plain TCP).
    package let tls: RedisTLS?
    /// The addresses `endpoint.host` resolves to now, as far as the relay knows (empty: it does not resolve).
    package var addresses: [SocketAddress] { addressBook.current }
    /// How long after issue a ticket may carry 0-RTT, in seconds.
    package let window: Int64
    /// How long a claim lives: the window plus the clock-skew allowance, in milliseconds.
    package let keyLifetimeMilliseconds: Int64
    private let state: Locked<State>
    /// The budget's grants: this relay's (`LocalZeroRTTGrants`), or shared by the relay's worker processes.
    let budget: any ZeroRTTGrantCounter

    struct State {
        var counters = AntiReplayCounters.zero
        var recent: RecentTickets
        /// The marker this relay last saw ("" until it read one).
        var belief = ""
        /// Unix seconds from which tickets are known to be remembered (nil until a marker was read).
        var rememberedSince: Int64?
        /// The latest claim sent under `belief` (wall-clock milliseconds; 0: none).
        var lastClaimMilliseconds: Int64 = 0
        /// Why the store cannot be used, when a connection failed in a way to fix (TLS verification, the wrong kind
        /// of port, AUTH refused); nil once it answers.
        var storeError: TransportError?
    }

    /// Resolves the host and, when Redis answers within `startupDeadline`, reads (or writes) its memory marker, so
    /// tickets issued from now on can carry 0-RTT at once; unreachable, each loop's connection reads it when it
    /// connects.
    ///
    /// - Parameters:
    ///   - capacity: the most claims this relay makes within one window (its share of the store's memory).
    ///   - windowSeconds: how long after issue a ticket may carry 0-RTT.
    ///   - recentTickets: how many tickets it claimed lately it remembers (a replay of them costs no round trip).
    ///   - grants: makes the counter of the budget's grants (given the capacity and a claim's lifetime in ms; taken
    ///     at monotonic ms) when it is not this process's alone: the relay's workers share one (nil: a
    ///     `LocalZeroRTTGrants`).
    /// A host that does not resolve (or a store that does not answer) leaves the relay starting with 0-RTT refused
    /// (counted) until the store answers. `tls`: TLS on every connection (`rediss://`).
    package init(
        endpoint: RedisStoreEndpoint, capacity: Int, windowSeconds: Int64, recentTickets: Int = 16_384,
        startupDeadline: UInt64 = 1_000_000_000, grants: ZeroRTTGrantCounterMaker? = nil, tls: RedisTLS? = nil
    ) {
        self.endpoint = endpoint
        self.tls = tls
        addressBook = RedisAddressBook(host: endpoint.host, port: endpoint.port)
        window = max(1, windowSeconds)
        keyLifetimeMilliseconds = window * 1000 + endpoint.clockSkewAllowance
        budget = (grants ?? LocalZeroRTTGrants.init)(capacity, keyLifetimeMilliseconds)
        state = Locked(State(recent: RecentTickets(capacity: recentTickets)))
        let connection = RedisConnection(
            addresses: addressBook.current, database: endpoint.database, auth: endpoint.authCommand, tls: tls)
        let read = RedisClaimScript.command(prefix: endpoint.keyPrefix, markerRead(), byHash: false)
        do {
            if let reply = try connection.call([read], deadline: MonotonicClock.now() + startupDeadline).first {
                _ = learn(reply)
            }
        } catch {
            state.withLock { $0.storeError = error }
        }
    }

    /// Why the store cannot be used now, in words that say what to fix (nil: it answers, or no failure says more
    /// than "unreachable").
    package var storeError: TransportError? { state.withLock { $0.storeError } }

    /// The counters of every loop of the server.
    package var snapshot: AntiReplayCounters { state.withLock { $0.counters } }

    /// Since when the store remembers every ticket used (unix seconds), as far as this relay knows.
    package var rememberedSince: Int64? { state.withLock { $0.rememberedSince } }

    /// The marker this relay believes the store holds ("" before it read one).
    package var belief: String { state.withLock { $0.belief } }

    /// Tickets claimed lately (for tests).
    package var recentTicketCount: Int { state.withLock { $0.recent.count } }

    /// Claims counted in the budget now (for tests).
    package var budgetUsed: Int { budget.used(now: Int64(MonotonicClock.now() / 1_000_000)) }

    func withState<T>(_ body: (inout State) -> T) -> T { state.withLock(body) }

    /// The request that only reads the marker (sent on each new connection).
    func markerRead() -> RedisClaimScript.Request {
        RedisClaimScript.Request(
            belief: state.withLock { $0.belief }, nowMilliseconds: Self.wallClockMilliseconds(),
            lastClaimMilliseconds: state.withLock { $0.lastClaimMilliseconds }, ticket: "",
            lifetimeMilliseconds: keyLifetimeMilliseconds)
    }

    /// Takes in the marker a script reply carries; returns the reply, or nil when it is not the script's.
    @discardableResult
    func learn(_ value: RESPValue) -> RedisClaimScript.Reply? {
        guard let reply = RedisClaimScript.reply(value) else { return nil }
        let text: String
        switch reply {
        case .claimed(let marker), .duplicate(let marker), .memoryChanged(let marker): text = marker
        case .marker(let marker): text = marker
        }
        guard let marker = RedisClaimScript.MemoryMarker(text) else { return nil }
        state.withLock { state in
            state.storeError = nil
            if state.belief != marker.text {
                state.belief = marker.text
                state.lastClaimMilliseconds = 0
            }
            // Tickets created before the marker plus the allowance may have been used in a memory that is gone.
            let milliseconds = marker.milliseconds + endpoint.clockSkewAllowance
            let seconds = (milliseconds + 999) / 1000  // GnuTLS' start is set in whole seconds: round up
            state.rememberedSince = max(state.rememberedSince ?? seconds, seconds)
        }
        return reply
    }

    /// CLOCK_REALTIME in milliseconds (the clock tickets are stamped with).
    package static func wallClockMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
