/// What an emulated path does to packets besides delaying them, on top of the delay line's seeded loss: the QUIC
/// interop runner's network conditions (burst-limited loss, corruption, blackholes, drop lists, reordering and a
/// rebinding NAT), sans-IO. Times are nanoseconds after the moment the impairments were applied
/// (`DelayLine.impair(_:at:)`).
package struct Impairments: Sendable, Hashable {
    /// At most this many packets in a row of one direction are lost (or corrupted); the next one passes, as the
    /// runner's `burst` option does. nil: no limit.
    package var maximumBurst: Int?
    /// Probability (0...1) that a UDP packet gets one byte of its first 50 payload bytes changed. The UDP checksum
    /// is recomputed, so the packet reaches the socket and only QUIC notices. Version Negotiation is never hit.
    package var corruptionRate: Double
    /// Drop every packet in both directions during these windows.
    package var blackhole: BlackholeSchedule?
    /// 1-based numbers of the client's UDP datagrams (towards the server) to drop, e.g. 2...7.
    package var dropClientDatagrams: Set<Int>
    /// 1-based numbers of the server's UDP datagrams (towards the client) to drop.
    package var dropServerDatagrams: Set<Int>
    /// Probability (0...1) that a packet is held back by `reorderDelay` more than the others, so later packets of
    /// its direction overtake it.
    package var reorderRate: Double
    /// The extra delay of a reordered packet, in nanoseconds.
    package var reorderDelay: UInt64
    /// A NAT on the client's side that rebinds on a schedule.
    package var nat: NATRebinding?
    /// Record every client source address in the counters (`clientAddressesSeen`), as a NAT does by itself: for a
    /// client that moves on its own (connection migration). Off by default: a copy per packet.
    package var recordClientAddresses = false

    /// No impairment beyond the delay line's own loss.
    package init(
        maximumBurst: Int? = nil, corruptionRate: Double = 0, blackhole: BlackholeSchedule? = nil,
        dropClientDatagrams: Set<Int> = [], dropServerDatagrams: Set<Int> = [], reorderRate: Double = 0,
        reorderDelay: UInt64 = 10_000_000, nat: NATRebinding? = nil
    ) {
        self.maximumBurst = maximumBurst
        self.corruptionRate = corruptionRate
        self.blackhole = blackhole
        self.dropClientDatagrams = dropClientDatagrams
        self.dropServerDatagrams = dropServerDatagrams
        self.reorderRate = reorderRate
        self.reorderDelay = reorderDelay
        self.nat = nat
    }
}

/// Blackhole windows: everything is dropped from `start` for `duration`, then again every `period` if given.
package struct BlackholeSchedule: Sendable, Hashable {
    /// Nanoseconds after the origin when the first outage starts.
    package var start: UInt64
    /// How long each outage lasts, in nanoseconds.
    package var duration: UInt64
    /// Nanoseconds from one outage's start to the next; nil: a single outage.
    package var period: UInt64?

    /// An outage from `start` for `duration`, repeated every `period` when given (all in nanoseconds).
    package init(start: UInt64, duration: UInt64, period: UInt64? = nil) {
        self.start = start
        self.duration = duration
        self.period = period
    }

    /// Whether `elapsed` nanoseconds after the origin fall inside an outage.
    package func isDark(at elapsed: UInt64) -> Bool {
        guard elapsed >= start else { return false }
        var offset = elapsed - start
        if let period, period > 0 { offset %= period }
        return offset < duration
    }
}

/// The NAT in front of the client: it rewrites the source port (and with `rewriteAddress` the source address) of
/// the client's UDP packets, first at `firstRebind`, then every `interval`; each rebind deletes the old mapping, so
/// the server's packets to the old port or address are dropped. Before the first rebind the mapping is the identity.
package struct NATRebinding: Sendable, Hashable {
    /// Nanoseconds after the origin of the first rebind.
    package var firstRebind: UInt64
    /// Nanoseconds between rebinds; nil: rebind once.
    package var interval: UInt64?
    /// Also move the client to another address of its subnet (IPv4 /24 or IPv6 /64).
    package var rewriteAddress: Bool

    /// A NAT that rebinds at `firstRebind`, then every `interval` (nanoseconds).
    package init(firstRebind: UInt64, interval: UInt64?, rewriteAddress: Bool) {
        self.firstRebind = firstRebind
        self.interval = interval
        self.rewriteAddress = rewriteAddress
    }

    /// How many rebinds have happened `elapsed` nanoseconds after the origin.
    package func rebinds(at elapsed: UInt64) -> Int {
        guard elapsed >= firstRebind else { return 0 }
        guard let interval, interval > 0 else { return 1 }
        return Int(min((elapsed - firstRebind) / interval, UInt64(Int.max - 1))) + 1
    }
}

/// The delay line's wire-level evidence: what entered it and what it did to it, per direction.
package struct DelayLineCounters: Sendable, Hashable {
    /// Counts for one direction.
    package struct Direction: Sendable, Hashable {
        /// Packets that entered the line (before any drop).
        package var packets: UInt64 = 0
        /// IP bytes that entered the line.
        package var bytes: UInt64 = 0
        /// UDP datagrams that entered, over IPv4 and over IPv6.
        package var udp4: UInt64 = 0
        /// UDP datagrams over IPv6 that entered.
        package var udp6: UInt64 = 0
        /// Packets that left the line towards the other side.
        package var delivered: UInt64 = 0
        /// UDP datagrams marked ECT(0) or ECT(1) in the IP header (ECN-capable transport).
        package var ect: UInt64 = 0
        /// UDP datagrams marked CE (congestion experienced).
        package var ce: UInt64 = 0
    }

    /// Client to server.
    package var clientToServer = Direction()
    /// Server to client.
    package var serverToClient = Direction()
    /// Dropped by the seeded loss.
    package var lost: UInt64 = 0
    /// Dropped by the UDP filter.
    package var filtered: UInt64 = 0
    /// Dropped inside a blackhole window.
    package var blackholed: UInt64 = 0
    /// Dropped by a drop list.
    package var dropListed: UInt64 = 0
    /// Server packets to a deleted NAT mapping, dropped.
    package var natDropped: UInt64 = 0
    /// UDP packets with one payload byte changed.
    package var corrupted: UInt64 = 0
    /// Packets held back so later ones overtook them.
    package var reordered: UInt64 = 0
    /// NAT rebinds so far.
    package var rebinds: UInt64 = 0
    /// Distinct client addresses the server saw (the NAT's public side), counted while a NAT is in force.
    package var clientAddressesSeen: Set<[UInt8]> = []
}
