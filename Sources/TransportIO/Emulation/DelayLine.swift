/// The scheduling of an emulated path, sans-IO: each packet is released `oneWayDelay` after it entered, in FIFO
/// order per direction, unless seeded loss or the UDP filter drops it. Deterministic for a given seed.
package struct DelayLine {
    package enum Direction: Sendable { case clientToServer, serverToClient }

    package let oneWayDelay: UInt64
    package let lossRate: Double
    /// Drop every UDP packet (IPv4 protocol 17 / IPv6 next header 17): "UDP blocked".
    package var dropUDP = false
    private var random: UInt64
    private var queues: [[(release: UInt64, packet: [UInt8])]] = [[], []]
    private var heads = [0, 0]
    package private(set) var dropped: UInt64 = 0

    package init(oneWayDelay: UInt64, lossRate: Double, seed: UInt64) {
        self.oneWayDelay = oneWayDelay
        self.lossRate = max(0, min(1, lossRate))
        self.random = seed
    }

    package mutating func enqueue(_ packet: [UInt8], direction: Direction, now: UInt64) {
        if dropUDP && Self.isUDP(packet) || lossRate > 0 && nextUniform() < lossRate {
            dropped += 1
            return
        }
        queues[index(direction)].append((now + oneWayDelay, packet))
    }

    /// Packets whose release time has come, in order.
    package mutating func due(now: UInt64) -> [(Direction, [UInt8])] {
        var result: [(Direction, [UInt8])] = []
        for direction in [Direction.clientToServer, .serverToClient] {
            let q = index(direction)
            while heads[q] < queues[q].count, queues[q][heads[q]].release <= now {
                result.append((direction, queues[q][heads[q]].packet))
                heads[q] += 1
            }
            if heads[q] > 1024, heads[q] * 2 > queues[q].count {
                queues[q].removeFirst(heads[q])
                heads[q] = 0
            }
        }
        return result
    }

    /// The earliest pending release time.
    package var nextDeadline: UInt64? {
        (0..<2).compactMap { heads[$0] < queues[$0].count ? queues[$0][heads[$0]].release : nil }.min()
    }

    private func index(_ direction: Direction) -> Int { direction == .clientToServer ? 0 : 1 }

    /// Whether an IP packet carries UDP.
    static func isUDP(_ packet: [UInt8]) -> Bool {
        guard let first = packet.first else { return false }
        switch first >> 4 {
        case 4: return packet.count > 9 && packet[9] == 17
        case 6: return packet.count > 6 && packet[6] == 17
        default: return false
        }
    }

    /// SplitMix64 → a uniform value in [0, 1).
    private mutating func nextUniform() -> Double {
        random &+= 0x9e37_79b9_7f4a_7c15
        var z = random
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}
