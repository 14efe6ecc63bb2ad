import TransportCore

/// The scheduling of an emulated path, sans-IO: no clock, no sockets, no threads. The caller passes `now`
/// (nanoseconds on any monotonic clock) and moves the bytes.
///
/// - A packet entered at `now` is released at exactly `now + oneWayDelay` (saturating), never before.
/// - Packets leave in FIFO order per direction (a packet never overtakes an earlier one of its direction, even if
///   the caller's `now` went backwards), except those `Impairments.reorderRate` holds back; `due(now:)`
///   interleaves the directions by release time, ties in enqueue order.
/// - Loss: each enqueued packet draws one number from a SplitMix64 generator seeded with `seed` (when
///   `0 < lossRate`) and is dropped when it is below `lossRate`. The k-th packet's fate depends only on the seed
///   and k, so the same seed and packet sequence give the same drops, whatever the UDP filter does.
/// - `dropUDP` silently discards IPv4 packets whose protocol is 17 and IPv6 packets whose upper-layer header (after
///   any hop-by-hop, routing, fragment, destination-options or AH extension headers) is 17: "UDP blocked".
/// - `impair(_:at:)` adds the interop runner's conditions (see `Impairments`); each random choice has its own
///   generator derived from `seed`, so adding corruption or reordering never changes which packets are lost.
/// - `counters` and `wire` are the path's evidence: packets per direction, what was dropped or changed and why, and
///   the cleartext QUIC long headers that went by.
package struct DelayLine {
    package enum Direction: Sendable, Hashable { case clientToServer, serverToClient }

    package let oneWayDelay: UInt64
    package let lossRate: Double
    /// Drop every UDP packet (IPv4 protocol 17 / IPv6 next header 17): "UDP blocked".
    package var dropUDP = false
    /// Packets dropped so far, for any reason.
    package var dropped: UInt64 {
        counters.lost + counters.filtered + counters.blackholed + counters.dropListed + counters.natDropped
    }
    /// Packets dropped by seeded loss.
    package var lost: UInt64 { counters.lost }
    /// Packets dropped by the UDP filter.
    package var filtered: UInt64 { counters.filtered }
    /// Packets accepted and not yet released.
    package var pendingCount: Int { (0..<4).reduce(0) { $0 + queues[$1].count - heads[$1] } }
    /// What entered the line and what it did to it.
    package private(set) var counters = DelayLineCounters()
    /// The cleartext QUIC long headers seen: client packets that reached the server, server packets as sent.
    package private(set) var wire = QUICWireTally()
    /// The impairments in force (see `impair(_:at:)`).
    package private(set) var impairments = Impairments()

    private struct Entry {
        let release: UInt64
        let sequence: UInt64
        let packet: [UInt8]
    }

    private var random: UInt64
    private var corruptionRandom: UInt64
    private var reorderRandom: UInt64
    private let seed: UInt64
    private var origin: UInt64 = 0
    private var nat: NATTable?
    private var sequence: UInt64 = 0
    /// Per direction, a FIFO of ordinary packets and a FIFO of held-back (reordered) ones.
    private var queues: [[Entry]] = [[], [], [], []]
    private var heads = [0, 0, 0, 0]
    private var burst = [0, 0]
    private var corruptionBurst = [0, 0]
    private var udpDatagrams = [0, 0]

    /// `oneWayDelay` in nanoseconds; `lossRate` is clamped to 0...1 (NaN counts as 0).
    package init(oneWayDelay: UInt64, lossRate: Double, seed: UInt64) {
        self.oneWayDelay = oneWayDelay
        self.lossRate = Self.clamp(lossRate)
        self.random = seed
        self.seed = seed
        self.corruptionRandom = seed ^ 0x636f_7272_7570_7421
        self.reorderRandom = seed ^ 0x7265_6f72_6465_7221
    }

    /// Applies `impairments` from `now` on: schedules (blackholes, NAT rebinds) count from `now`; drop lists
    /// count datagrams from here; the NAT starts with identity mappings.
    package mutating func impair(_ impairments: Impairments, at now: UInt64) {
        var impairments = impairments
        impairments.corruptionRate = Self.clamp(impairments.corruptionRate)
        impairments.reorderRate = Self.clamp(impairments.reorderRate)
        self.impairments = impairments
        origin = now
        udpDatagrams = [0, 0]
        nat = impairments.nat.map { NATTable(rewriteAddress: $0.rewriteAddress, seed: seed ^ 0x6e61_7421) }
    }

    /// Accepts `packet` (an IP packet, as read from a TUN device) entering the path at `now`, unless the UDP
    /// filter, a blackhole, a drop list, the seeded loss or the NAT drops it.
    package mutating func enqueue(packet: [UInt8], direction: Direction, now: UInt64) {
        let d = index(direction)
        let udp = UDPPacket.completeHeader(packet)
        count(packet, udp: udp, direction: direction)
        let lose = lossRate > 0 && nextUniform() < lossRate
        if dropUDP && Self.isUDP(packet) {
            counters.filtered += 1
            return
        }
        let elapsed = now >= origin ? now - origin : 0
        if let blackhole = impairments.blackhole, blackhole.isDark(at: elapsed) {
            counters.blackholed += 1
            return
        }
        if udp != nil {
            udpDatagrams[d] += 1
            let list = direction == .clientToServer ? impairments.dropClientDatagrams : impairments.dropServerDatagrams
            if list.contains(udpDatagrams[d]) {
                counters.dropListed += 1
                return
            }
        }
        if lose && burst[d] < (impairments.maximumBurst ?? .max) {
            burst[d] += 1
            counters.lost += 1
            return
        }
        burst[d] = 0
        var packet = packet
        if let udp {
            guard translate(&packet, udp: udp, direction: direction, elapsed: elapsed) else {
                counters.natDropped += 1
                return
            }
            if direction == .clientToServer {
                wire.clientDelivered(packet[(udp + 8)...])
                if nat != nil || impairments.recordClientAddresses {  // else spare the per-packet copy
                    counters.clientAddressesSeen.insert(UDPPacket.endpoint(packet, udp: udp, source: true).address)
                }
            }
            corrupt(&packet, udp: udp, direction: direction)
        }
        var (release, overflow) = now.addingReportingOverflow(oneWayDelay)
        var queue = d * 2
        if impairments.reorderRate > 0 && SplitMix64.uniform(&reorderRandom) < impairments.reorderRate {
            counters.reordered += 1
            queue += 1
            let (later, more) = release.addingReportingOverflow(impairments.reorderDelay)
            (release, overflow) = (later, overflow || more)
        }
        queues[queue].append(Entry(release: overflow ? .max : release, sequence: sequence, packet: packet))
        sequence += 1
    }

    /// Same as `enqueue(packet:direction:now:)`.
    package mutating func enqueue(_ packet: [UInt8], direction: Direction, now: UInt64) {
        enqueue(packet: packet, direction: direction, now: now)
    }

    /// Removes and returns the packets whose release time is at or before `now`: FIFO per direction (reordered
    /// packets apart), everything merged by release time (ties in enqueue order).
    package mutating func due(now: UInt64) -> [(Direction, [UInt8])] {
        var result: [(Direction, [UInt8])] = []
        while true {
            var best: (queue: Int, entry: Entry)?
            for q in 0..<4 {
                guard let entry = readyHead(q, now: now) else { continue }
                if let current = best,
                    (current.entry.release, current.entry.sequence) <= (entry.release, entry.sequence)
                {
                    continue
                }
                best = (q, entry)
            }
            guard let (q, entry) = best else {
                compact()
                return result
            }
            let direction: Direction = q < 2 ? .clientToServer : .serverToClient
            if direction == .clientToServer {
                counters.clientToServer.delivered += 1
            } else {
                counters.serverToClient.delivered += 1
            }
            result.append((direction, entry.packet))
            heads[q] += 1
        }
    }

    /// The earliest pending release time (when `due` will next return something), or nil when nothing is pending.
    package var nextDeadline: UInt64? {
        (0..<4).compactMap { heads[$0] < queues[$0].count ? queues[$0][heads[$0]].release : nil }.min()
    }

    private func readyHead(_ q: Int, now: UInt64) -> Entry? {
        guard heads[q] < queues[q].count, queues[q][heads[q]].release <= now else { return nil }
        return queues[q][heads[q]]
    }

    private mutating func compact() {
        for q in 0..<4
        where heads[q] > 0 && (heads[q] == queues[q].count || heads[q] >= 1024 && heads[q] * 2 > queues[q].count) {
            queues[q].removeFirst(heads[q])
            heads[q] = 0
        }
    }

    private func index(_ direction: Direction) -> Int { direction == .clientToServer ? 0 : 1 }

    private static func clamp(_ rate: Double) -> Double { rate.isNaN ? 0 : Swift.max(0, Swift.min(1, rate)) }

    private mutating func count(_ packet: [UInt8], udp: Int?, direction: Direction) {
        var tally = direction == .clientToServer ? counters.clientToServer : counters.serverToClient
        tally.packets += 1
        tally.bytes += UInt64(packet.count)
        if udp != nil {
            let v4 = packet[0] >> 4 == 4
            if v4 { tally.udp4 += 1 } else { tally.udp6 += 1 }
            let ecn = (v4 ? packet[1] : packet[1] >> 4) & 3  // IPv4 TOS / IPv6 traffic class, low two bits
            if ecn == 1 || ecn == 2 { tally.ect += 1 } else if ecn == 3 { tally.ce += 1 }
        }
        if direction == .clientToServer {
            counters.clientToServer = tally
        } else {
            counters.serverToClient = tally
            if let udp { wire.serverSent(packet[(udp + 8)...]) }
        }
    }

    /// The NAT: rewrites the client's source on the way out and the destination on the way back; false when the
    /// packet goes to a deleted mapping.
    private mutating func translate(_ packet: inout [UInt8], udp: Int, direction: Direction, elapsed: UInt64) -> Bool {
        guard let schedule = impairments.nat, var table = nat else { return true }
        defer { nat = table }
        let generation = schedule.rebinds(at: elapsed)
        if generation > table.generation {
            counters.rebinds += UInt64(generation - table.generation)
            table.advance(to: generation)
        }
        if direction == .clientToServer {
            let real = UDPPacket.endpoint(packet, udp: udp, source: true)
            let mapped = table.outbound(real)
            if mapped != real { UDPPacket.rewrite(&packet, udp: udp, source: true, to: mapped) }
            return true
        }
        switch table.inbound(UDPPacket.endpoint(packet, udp: udp, source: false)) {
        case .deliver(let real):
            if real != UDPPacket.endpoint(packet, udp: udp, source: false) {
                UDPPacket.rewrite(&packet, udp: udp, source: false, to: real)
            }
            return true
        case .drop: return false
        case .pass: return true
        }
    }

    /// One byte of the first 50 UDP payload bytes changed (never in a Version Negotiation packet), checksum fixed.
    private mutating func corrupt(_ packet: inout [UInt8], udp: Int, direction: Direction) {
        guard impairments.corruptionRate > 0 else { return }
        let d = index(direction)
        let hit = SplitMix64.uniform(&corruptionRandom) < impairments.corruptionRate
        let payload = udp + 8
        let span = min(50, packet.count - payload)
        guard hit && span > 0 && corruptionBurst[d] < (impairments.maximumBurst ?? .max) else {
            corruptionBurst[d] = 0
            return
        }
        if QUICWireTally.longHeader(packet[payload...])?.kind == .versionNegotiation { return }
        corruptionBurst[d] += 1
        let choice = SplitMix64.next(&corruptionRandom)
        let offset = payload + Int(choice % UInt64(span))
        packet[offset] ^= UInt8(1 + (choice >> 32) % 255)  // never 0: the byte always changes
        UDPPacket.fixChecksums(&packet, udp: udp)
        counters.corrupted += 1
    }

    /// Whether an IP packet carries UDP (IPv4 protocol 17; IPv6 upper-layer header 17 after extension headers).
    /// Anything else — too short, not IPv4/IPv6, ESP, no next header, a truncated chain — is not UDP.
    static func isUDP(_ packet: [UInt8]) -> Bool { UDPPacket.headerOffset(packet) != nil }

    /// SplitMix64 → a uniform value in [0, 1).
    private mutating func nextUniform() -> Double { SplitMix64.uniform(&random) }
}
