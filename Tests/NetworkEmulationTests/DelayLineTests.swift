import Testing
import TransportIO

@testable import NetworkEmulation

@Suite("Delay line scheduling (in memory)")
struct DelayLineTests {
    /// A minimal IPv4 header (20 bytes) with `protocol`, then `payload` bytes.
    static func ipv4(protocol number: UInt8, payload: Int = 8) -> [UInt8] {
        [0x45, 0, 0, UInt8(20 + payload), 0, 0, 0, 0, 64, number] + [UInt8](repeating: 0, count: 10 + payload)
    }

    /// A minimal IPv6 header (40 bytes) with next header `next`, then `rest`.
    static func ipv6(next: UInt8, _ rest: [UInt8] = [UInt8](repeating: 0, count: 8)) -> [UInt8] {
        [0x60, 0, 0, 0, 0, UInt8(rest.count), next, 64] + [UInt8](repeating: 0, count: 32) + rest
    }

    static let udp = ipv4(protocol: 17)
    static let tcp = ipv4(protocol: 6, payload: 20)
    static let icmp = ipv4(protocol: 1)
    static let udp6 = ipv6(next: 17)
    static let tcp6 = ipv6(next: 6, [UInt8](repeating: 0, count: 20))
    static let icmp6 = ipv6(next: 58)
    /// IPv6 + hop-by-hop options (8 bytes, next = routing) + routing (16 bytes, next = fragment) + fragment
    /// (next = UDP) + UDP header.
    static let udp6WithExtensions = ipv6(
        next: 0,
        [43, 0] + [UInt8](repeating: 0, count: 6)
            + [44, 1] + [UInt8](repeating: 0, count: 14)
            + [17, 0, 0, 1, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 8))
    /// IPv6 + destination options (next = TCP) + TCP header.
    static let tcp6WithExtensions = ipv6(
        next: 60,
        [6, 0] + [UInt8](repeating: 0, count: 6)
            + [UInt8](repeating: 0, count: 20))

    @Test func releasesExactlyAtNowPlusDelayAndNotBefore() {
        var line = DelayLine(oneWayDelay: 25_000_000, lossRate: 0, seed: 1)
        line.enqueue(packet: [1], direction: .clientToServer, now: 1_000)
        #expect(line.nextDeadline == 25_001_000)
        #expect(line.due(now: 1_000).isEmpty)
        #expect(line.due(now: 25_000_999).isEmpty)
        #expect(line.pendingCount == 1)
        let released = line.due(now: 25_001_000)
        #expect(released.count == 1 && released[0].0 == .clientToServer && released[0].1 == [1])
        #expect(line.nextDeadline == nil && line.pendingCount == 0)
        #expect(line.due(now: .max).isEmpty, "a packet is released once")
    }

    @Test func fifoPerDirectionAndDirectionsMergedByReleaseTime() {
        var line = DelayLine(oneWayDelay: 25, lossRate: 0, seed: 1)
        line.enqueue(packet: [1], direction: .clientToServer, now: 100)
        line.enqueue(packet: [2], direction: .serverToClient, now: 101)
        line.enqueue(packet: [3], direction: .clientToServer, now: 102)
        line.enqueue(packet: [4], direction: .serverToClient, now: 102)  // same release as [3]: enqueue order
        #expect(line.nextDeadline == 125)
        #expect(line.due(now: 124).isEmpty)
        #expect(line.due(now: 125).map(\.1) == [[1]])
        #expect(line.nextDeadline == 126)
        let rest = line.due(now: 200)
        #expect(rest.map(\.1) == [[2], [3], [4]])
        #expect(rest.map(\.0) == [.serverToClient, .clientToServer, .serverToClient])
        #expect(line.nextDeadline == nil)
    }

    @Test func manyPacketsKeepTheirOrderPerDirection() {
        var line = DelayLine(oneWayDelay: 10, lossRate: 0, seed: 1)
        for i in 0..<5_000 {
            line.enqueue(
                packet: [UInt8(i & 0xff), UInt8(i >> 8)], direction: i % 3 == 0 ? .serverToClient : .clientToServer,
                now: UInt64(i / 7))
        }
        var out: [(DelayLine.Direction, [UInt8])] = []
        var now: UInt64 = 0
        while let deadline = line.nextDeadline {
            #expect(deadline >= now)
            now = deadline
            out += line.due(now: now)
        }
        #expect(out.count == 5_000)
        let decode = { (p: [UInt8]) in Int(p[0]) | Int(p[1]) << 8 }
        let c = out.filter { $0.0 == .clientToServer }.map { decode($0.1) }
        let s = out.filter { $0.0 == .serverToClient }.map { decode($0.1) }
        #expect(c == (0..<5_000).filter { $0 % 3 != 0 })
        #expect(s == (0..<5_000).filter { $0 % 3 == 0 })
    }

    @Test func fifoHoldsEvenIfNowGoesBackwards() {
        var line = DelayLine(oneWayDelay: 10, lossRate: 0, seed: 1)
        line.enqueue(packet: [1], direction: .clientToServer, now: 100)
        line.enqueue(packet: [2], direction: .clientToServer, now: 50)  // release 60, but behind [1]
        #expect(line.nextDeadline == 110)
        #expect(line.due(now: 60).isEmpty)
        #expect(line.due(now: 110).map(\.1) == [[1], [2]])
    }

    @Test func releaseTimeSaturates() {
        var line = DelayLine(oneWayDelay: 10, lossRate: 0, seed: 1)
        line.enqueue(packet: [1], direction: .serverToClient, now: .max - 5)
        #expect(line.nextDeadline == .max)
        #expect(line.due(now: .max - 1).isEmpty)
        #expect(line.due(now: .max).count == 1)
    }

    @Test func zeroDelayReleasesAtOnce() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        line.enqueue(packet: [9], direction: .serverToClient, now: 42)
        #expect(line.nextDeadline == 42)
        #expect(line.due(now: 42).map(\.1) == [[9]])
    }

    @Test func seededLossIsDeterministicAndNearTheRate() {
        func kept(seed: UInt64, rate: Double) -> [UInt32] {
            var line = DelayLine(oneWayDelay: 0, lossRate: rate, seed: seed)
            for i in 0..<100_000 {
                line.enqueue(
                    packet: withUnsafeBytes(of: UInt32(i).littleEndian, Array.init), direction: .clientToServer, now: 0)
            }
            #expect(line.lost + UInt64(line.pendingCount) == 100_000)
            return line.due(now: 0).map { $0.1.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } }
        }
        let first = kept(seed: 7, rate: 0.1)
        #expect(first == kept(seed: 7, rate: 0.1), "same seed → same packets dropped")
        #expect(first != kept(seed: 8, rate: 0.1), "another seed → other drops")
        // 100k Bernoulli(0.1) trials: σ ≈ 95 losses, so ±1000 is more than 10σ.
        #expect(first.count > 89_000 && first.count < 91_000, "kept \(first.count)")
        let heavy = kept(seed: 3, rate: 0.5).count
        #expect(heavy > 49_000 && heavy < 51_000, "kept \(heavy)")
        #expect(kept(seed: 3, rate: 0).count == 100_000)
        #expect(kept(seed: 3, rate: 1).isEmpty)
    }

    @Test func lossPatternDoesNotDependOnTheUDPFilter() {
        func survivors(dropUDP: Bool) -> [UInt8] {
            var line = DelayLine(oneWayDelay: 0, lossRate: 0.3, seed: 11)
            line.dropUDP = dropUDP
            for i in 0..<200 {
                var packet = i % 2 == 0 ? Self.udp : Self.tcp
                packet[packet.count - 1] = UInt8(i)
                line.enqueue(packet: packet, direction: .clientToServer, now: 0)
            }
            return line.due(now: 0).map { $0.1.last! }
        }
        let all = survivors(dropUDP: false)
        #expect(survivors(dropUDP: true) == all.filter { $0 % 2 == 1 })
    }

    @Test func udpFilterDropsOnlyUDPOverIPv4AndIPv6() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        line.dropUDP = true
        let kept = [Self.tcp, Self.icmp, Self.tcp6, Self.icmp6, Self.tcp6WithExtensions]
        for packet in [Self.udp, Self.udp6, Self.udp6WithExtensions] + kept {
            line.enqueue(packet: packet, direction: .clientToServer, now: 0)
        }
        #expect(line.due(now: 0).map(\.1) == kept)
        #expect(line.filtered == 3 && line.dropped == 3 && line.lost == 0)

        line.dropUDP = false
        line.enqueue(packet: Self.udp, direction: .serverToClient, now: 0)
        line.enqueue(packet: Self.udp6, direction: .serverToClient, now: 0)
        #expect(line.due(now: 0).map(\.1) == [Self.udp, Self.udp6], "the filter can be turned off again")
    }

    @Test func ipHeaderParsing() {
        #expect(DelayLine.isUDP(Self.udp) && DelayLine.isUDP(Self.udp6) && DelayLine.isUDP(Self.udp6WithExtensions))
        #expect(!DelayLine.isUDP(Self.tcp) && !DelayLine.isUDP(Self.tcp6) && !DelayLine.isUDP(Self.tcp6WithExtensions))
        #expect(!DelayLine.isUDP([]))
        #expect(!DelayLine.isUDP([0x45, 0, 0, 10, 0, 0, 0, 0, 64, 17]), "truncated IPv4 header")
        #expect(!DelayLine.isUDP(Array(Self.udp6.prefix(30))), "truncated IPv6 header")
        #expect(!DelayLine.isUDP(Array(Self.udp6WithExtensions.prefix(41))), "truncated extension header")
        #expect(!DelayLine.isUDP([0x25] + Self.udp.dropFirst()), "neither version 4 nor 6")
        #expect(!DelayLine.isUDP(Self.ipv6(next: 59)), "no next header")
    }
}
