import Glibc

/// How many QUIC connections one source may hold and open: a live cap and a token bucket of new connections.
package struct SourceLimits: Sendable, Equatable {
    /// Live connections per source and per account (see `SourceLedger`).
    package var maxLive: Int
    /// New connections per second per source, sustained.
    package var perSecond: Int
    /// New connections a source may open at once (the bucket's size).
    package var burst: Int

    package init(maxLive: Int, perSecond: Int, burst: Int) {
        self.maxLive = maxLive
        self.perSecond = perSecond
        self.burst = burst
    }

    /// Nanoseconds an empty bucket takes to fill up again.
    var refillTime: UInt64 {
        UInt64(max(1, burst)) * nanosecondsPerSecond / UInt64(max(1, perSecond))
    }
}

/// Per-source accounting of new QUIC connections, so that one address cannot take the connection table.
///
/// A source is an IPv4 address (IPv4-mapped IPv6 counts as IPv4) or an IPv6 /64: one subscriber line, or one NAT.
/// Each source has two accounts with the same `SourceLimits`: connections whose address was validated (a Retry or
/// NEW_TOKEN token) and those not (yet). Spoofed Initials can only charge the second account, so an attacker
/// forging an office's address cannot use up the budget of the phones behind it: they get a Retry and then are
/// charged to the first account.
///
/// Every call is O(1) (amortized): a dictionary lookup, and at most two steps of expiry. A source's entry lives
/// while it has live connections and then until its buckets are full again; nothing else is kept, so memory is
/// bounded by the live connections plus the sources that closed their last one within one refill time.
package struct SourceLedger {
    /// A source: IPv4 in `low` (with `high` all ones), or an IPv6 /64 prefix in `high` (with `low` zero).
    package struct Key: Hashable, Sendable {
        package let high: UInt64
        package let low: UInt64

        package init(_ address: SocketAddress) {
            var high: UInt64 = .max
            var low: UInt64 = 0
            withUnsafeBytes(of: address.storage) { raw in
                switch address.family {
                case AF_INET:
                    low = UInt64(UInt32(bigEndian: raw.load(as: sockaddr_in.self).sin_addr.s_addr))
                case AF_INET6:
                    withUnsafeBytes(of: raw.load(as: sockaddr_in6.self).sin6_addr) { bytes in
                        let prefix = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                        let suffix = bytes.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                        if prefix == 0, suffix >> 32 == 0xffff {
                            low = suffix & 0xffff_ffff  // ::ffff:a.b.c.d on a dual-stack socket
                        } else {
                            high = prefix
                        }
                    }
                default:
                    break
                }
            }
            self.high = high
            self.low = low
        }
    }

    /// What a connection was charged to; hand it back with `release` when the connection is gone.
    package struct Charge: Sendable {
        package let key: Key
        package let validated: Bool

        package init(key: Key, validated: Bool) {
            self.key = key
            self.validated = validated
        }
    }

    /// Why a source may not open another connection now.
    package enum Refusal: Sendable, Equatable {
        /// It holds `SourceLimits.maxLive` connections.
        case tooManyLive
        /// It used its burst and opens connections faster than `SourceLimits.perSecond`.
        case tooFast
    }

    /// The answer to `admit`.
    package enum Admission: Sendable {
        /// The connection fits; `release` the charge when the connection is gone.
        case admitted(Charge)
        /// The source is over its budget.
        case refused(Refusal)
    }

    private struct Account {
        var live = 0
        var tokens: Double
        var updated: UInt64

        /// Refills the bucket for the time elapsed, then takes one token if a connection fits.
        mutating func take(_ limits: SourceLimits, now: UInt64) -> Refusal? {
            let elapsed = Double(now &- min(now, updated)) / Double(nanosecondsPerSecond)
            tokens = min(Double(limits.burst), tokens + elapsed * Double(limits.perSecond))
            updated = max(updated, now)
            guard live < limits.maxLive else { return .tooManyLive }
            guard tokens >= 1 else { return .tooFast }
            tokens -= 1
            live += 1
            return nil
        }
    }

    private struct Entry {
        var unvalidated: Account
        var validated: Account
        var lastCharged: UInt64
        var live: Int { unvalidated.live + validated.live }

        subscript(validated isValidated: Bool) -> Account {
            get { isValidated ? validated : unvalidated }
            set { if isValidated { validated = newValue } else { unvalidated = newValue } }
        }
    }

    package let limits: SourceLimits
    private var entries: [Key: Entry] = [:]
    /// Sources that closed their last connection, oldest first (may hold stale or repeated keys).
    private var idle: [Key] = []
    private var idleHead = 0

    package init(limits: SourceLimits) {
        self.limits = limits
    }

    /// Sources currently tracked.
    package var trackedSources: Int { entries.count }

    /// Charges a new connection from `source` to its account, or says why the source is over its budget.
    package mutating func admit(_ source: SocketAddress, validated: Bool, now: UInt64) -> Admission {
        expire(now: now)
        let key = Key(source)
        let fresh = Account(tokens: Double(limits.burst), updated: now)
        var entry = entries[key] ?? Entry(unvalidated: fresh, validated: fresh, lastCharged: now)
        if let refusal = entry[validated: validated].take(limits, now: now) {
            if entries[key] != nil { entries[key] = entry }  // keep the refill; never create an entry to refuse
            return .refused(refusal)
        }
        entry.lastCharged = now
        entries[key] = entry
        return .admitted(Charge(key: key, validated: validated))
    }

    /// A connection charged with `charge` is gone.
    package mutating func release(_ charge: Charge, now: UInt64) {
        expire(now: now)
        guard var entry = entries[charge.key] else { return }
        entry[validated: charge.validated].live = max(0, entry[validated: charge.validated].live - 1)
        entries[charge.key] = entry
        if entry.live == 0 { idle.append(charge.key) }
    }

    /// Forgets at most two idle sources whose buckets are full again.
    private mutating func expire(now: UInt64) {
        for _ in 0..<2 {
            guard idleHead < idle.count else { break }
            let key = idle[idleHead]
            if let entry = entries[key], entry.live == 0 {
                guard now &- min(now, entry.lastCharged) >= limits.refillTime else { break }
                entries[key] = nil
            }
            idleHead += 1
        }
        if idleHead > 64, idleHead * 2 > idle.count {
            idle.removeFirst(idleHead)
            idleHead = 0
        }
    }
}
