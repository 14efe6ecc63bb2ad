/// The scheduling of an emulated path, sans-IO: no clock, no sockets, no threads. The caller passes `now`
/// (nanoseconds on any monotonic clock) and moves the bytes.
///
/// - A packet entered at `now` is released at exactly `now + oneWayDelay` (saturating), never before.
/// - Packets leave in FIFO order per direction (a packet never overtakes an earlier one of its direction, even if
///   the caller's `now` went backwards); `due(now:)` interleaves the two directions by release time, ties in
///   enqueue order.
/// - Loss: each enqueued packet draws one number from a SplitMix64 generator seeded with `seed` (when
///   `0 < lossRate`) and is dropped when it is below `lossRate`. The k-th packet's fate depends only on the seed
///   and k, so the same seed and packet sequence give the same drops, whatever the UDP filter does.
/// - `dropUDP` silently discards IPv4 packets whose protocol is 17 and IPv6 packets whose upper-layer header (after
///   any hop-by-hop, routing, fragment, destination-options or AH extension headers) is 17: "UDP blocked".
package struct DelayLine {
    package enum Direction: Sendable, Hashable { case clientToServer, serverToClient }

    package let oneWayDelay: UInt64
    package let lossRate: Double
    /// Drop every UDP packet (IPv4 protocol 17 / IPv6 next header 17): "UDP blocked".
    package var dropUDP = false
    /// Packets dropped so far, by loss or by the UDP filter.
    package var dropped: UInt64 { lost + filtered }
    /// Packets dropped by seeded loss.
    package private(set) var lost: UInt64 = 0
    /// Packets dropped by the UDP filter.
    package private(set) var filtered: UInt64 = 0
    /// Packets accepted and not yet released.
    package var pendingCount: Int { (queues[0].count - heads[0]) + (queues[1].count - heads[1]) }

    private struct Entry {
        let release: UInt64
        let sequence: UInt64
        let packet: [UInt8]
    }

    private var random: UInt64
    private var sequence: UInt64 = 0
    private var queues: [[Entry]] = [[], []]
    private var heads = [0, 0]

    /// `oneWayDelay` in nanoseconds; `lossRate` is clamped to 0...1 (NaN counts as 0).
    package init(oneWayDelay: UInt64, lossRate: Double, seed: UInt64) {
        self.oneWayDelay = oneWayDelay
        self.lossRate = lossRate.isNaN ? 0 : Swift.max(0, Swift.min(1, lossRate))
        self.random = seed
    }

    /// Accepts `packet` (an IP packet, as read from a TUN device) entering the path at `now`, unless the UDP
    /// filter or the seeded loss drops it.
    package mutating func enqueue(packet: [UInt8], direction: Direction, now: UInt64) {
        let lose = lossRate > 0 && nextUniform() < lossRate
        if dropUDP && Self.isUDP(packet) {
            filtered += 1
            return
        }
        if lose {
            lost += 1
            return
        }
        let (release, overflow) = now.addingReportingOverflow(oneWayDelay)
        queues[index(direction)].append(Entry(release: overflow ? .max : release, sequence: sequence, packet: packet))
        sequence += 1
    }

    /// Same as `enqueue(packet:direction:now:)`.
    package mutating func enqueue(_ packet: [UInt8], direction: Direction, now: UInt64) {
        enqueue(packet: packet, direction: direction, now: now)
    }

    /// Removes and returns the packets whose release time is at or before `now`: FIFO per direction, the two
    /// directions merged by release time (ties in enqueue order).
    package mutating func due(now: UInt64) -> [(Direction, [UInt8])] {
        var result: [(Direction, [UInt8])] = []
        while true {
            let c = readyHead(0, now: now)
            let s = readyHead(1, now: now)
            let q: Int
            switch (c, s) {
            case (nil, nil):
                compact()
                return result
            case (.some, nil): q = 0
            case (nil, .some): q = 1
            case (.some(let a), .some(let b)): q = (a.release, a.sequence) <= (b.release, b.sequence) ? 0 : 1
            }
            result.append((q == 0 ? .clientToServer : .serverToClient, queues[q][heads[q]].packet))
            heads[q] += 1
        }
    }

    /// The earliest pending release time (when `due` will next return something), or nil when nothing is pending.
    package var nextDeadline: UInt64? {
        (0..<2).compactMap { heads[$0] < queues[$0].count ? queues[$0][heads[$0]].release : nil }.min()
    }

    private func readyHead(_ q: Int, now: UInt64) -> Entry? {
        guard heads[q] < queues[q].count, queues[q][heads[q]].release <= now else { return nil }
        return queues[q][heads[q]]
    }

    private mutating func compact() {
        for q in 0..<2
        where heads[q] > 0 && (heads[q] == queues[q].count || heads[q] >= 1024 && heads[q] * 2 > queues[q].count) {
            queues[q].removeFirst(heads[q])
            heads[q] = 0
        }
    }

    private func index(_ direction: Direction) -> Int { direction == .clientToServer ? 0 : 1 }

    /// Whether an IP packet carries UDP (IPv4 protocol 17; IPv6 upper-layer header 17 after extension headers).
    /// Anything else — too short, not IPv4/IPv6, ESP, no next header, a truncated chain — is not UDP.
    static func isUDP(_ packet: [UInt8]) -> Bool {
        guard let first = packet.first else { return false }
        switch first >> 4 {
        case 4:
            return packet.count >= 20 && packet[9] == 17
        case 6:
            guard packet.count >= 40 else { return false }
            var next = packet[6]
            var offset = 40
            for _ in 0..<16 {  // bounded walk over the extension-header chain
                switch next {
                case 17: return true
                case 0, 43, 60:  // hop-by-hop, routing, destination options: (length + 1) * 8 bytes
                    guard packet.count >= offset + 2 else { return false }
                    next = packet[offset]
                    offset += (Int(packet[offset + 1]) + 1) * 8
                case 44:  // fragment: 8 bytes; the upper-layer header is named in every fragment
                    guard packet.count >= offset + 8 else { return false }
                    next = packet[offset]
                    offset += 8
                case 51:  // authentication header: (length + 2) * 4 bytes
                    guard packet.count >= offset + 2 else { return false }
                    next = packet[offset]
                    offset += (Int(packet[offset + 1]) + 2) * 4
                default:
                    return false
                }
            }
            return false
        default:
            return false
        }
    }

    /// SplitMix64 → a uniform value in [0, 1).
    private mutating func nextUniform() -> Double {
        random &+= 0x9e37_79b9_7f4a_7c15
        var z = random
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        return Double(z >> 11) / Double(UInt64(1) << 53)
    }
}
