import Testing
@testable import TransportIO

@Suite("Delay line scheduling (in memory)")
struct DelayLineTests {
    static let udp: [UInt8] = [0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17] + [UInt8](repeating: 0, count: 18)
    static let tcp: [UInt8] = [0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6] + [UInt8](repeating: 0, count: 30)
    static let udp6: [UInt8] = [0x60, 0, 0, 0, 0, 8, 17, 64] + [UInt8](repeating: 0, count: 40)

    @Test func releasesExactlyAfterTheDelayInFIFOOrderPerDirection() {
        var line = DelayLine(oneWayDelay: 25, lossRate: 0, seed: 1)
        line.enqueue([1], direction: .clientToServer, now: 100)
        line.enqueue([2], direction: .serverToClient, now: 101)
        line.enqueue([3], direction: .clientToServer, now: 102)
        #expect(line.nextDeadline == 125)
        #expect(line.due(now: 124).isEmpty)
        let first = line.due(now: 125)
        #expect(first.map(\.1) == [[1]])
        let rest = line.due(now: 200)
        #expect(rest.filter { $0.0 == .clientToServer }.map(\.1) == [[3]])
        #expect(rest.filter { $0.0 == .serverToClient }.map(\.1) == [[2]])
        #expect(line.nextDeadline == nil)
    }

    @Test func seededLossIsDeterministicAndNearTheRate() {
        func survivors(seed: UInt64) -> Int {
            var line = DelayLine(oneWayDelay: 0, lossRate: 0.1, seed: seed)
            for index in 0..<100_000 { line.enqueue([UInt8(index & 0xff)], direction: .clientToServer, now: 0) }
            return line.due(now: 0).count
        }
        #expect(survivors(seed: 7) == survivors(seed: 7))
        let kept = survivors(seed: 7)
        #expect(kept > 89_000 && kept < 91_000)
    }

    @Test func udpFilterDropsOnlyUDPOverIPv4AndIPv6() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        line.dropUDP = true
        line.enqueue(Self.udp, direction: .clientToServer, now: 0)
        line.enqueue(Self.udp6, direction: .clientToServer, now: 0)
        line.enqueue(Self.tcp, direction: .clientToServer, now: 0)
        #expect(line.due(now: 0).map(\.1) == [Self.tcp])
        #expect(line.dropped == 2)
    }
}
