import Testing
import TransportIO

@testable import NetworkEmulation

/// The delay line's interop-runner impairments on a virtual clock: every packet is a real IPv4 or IPv6 UDP packet
/// with valid checksums, and the checks read the packets that come out.
@Suite("Delay line impairments (in memory)")
struct ImpairmentTests {
    static let client4: [UInt8] = [198, 18, 0, 1]
    static let server4: [UInt8] = [198, 18, 0, 2]
    static let client6: [UInt8] = [0xfd, 0, 0x01, 0x98, 0, 0x18] + [UInt8](repeating: 0, count: 9) + [1]
    static let server6: [UInt8] = [0xfd, 0, 0x01, 0x98, 0, 0x18] + [UInt8](repeating: 0, count: 9) + [2]

    /// An IPv4 or IPv6 (by address length) UDP packet with valid checksums, computed here independently.
    static func udp(
        from source: [UInt8], _ sourcePort: UInt16, to destination: [UInt8], _ destinationPort: UInt16,
        payload: [UInt8]
    ) -> [UInt8] {
        let length = 8 + payload.count
        var segment = bytes(sourcePort) + bytes(destinationPort) + bytes(UInt16(length)) + [0, 0] + payload
        let checksum = ~fold(sum(pseudoHeader(source, destination, length)) + sum(segment))
        segment[6] = UInt8((checksum == 0 ? 0xffff : checksum) >> 8)
        segment[7] = UInt8((checksum == 0 ? 0xffff : checksum) & 0xff)
        if source.count == 4 {
            var header: [UInt8] = [0x45, 0] + bytes(UInt16(20 + length)) + [0, 0, 0x40, 0, 64, 17, 0, 0]
            header += source + destination
            let headerChecksum = ~fold(sum(header))
            header[10] = UInt8(headerChecksum >> 8)
            header[11] = UInt8(headerChecksum & 0xff)
            return header + segment
        }
        return [0x60, 0, 0, 0] + bytes(UInt16(length)) + [17, 64] + source + destination + segment
    }

    /// Whether the kernel would accept the packet: IPv4 header and UDP checksums both verify.
    static func checksumsVerify(_ packet: [UInt8]) -> Bool {
        let v4 = packet[0] >> 4 == 4
        let udpStart = v4 ? 20 : 40
        if v4 && fold(sum(Array(packet[0..<20]))) != 0xffff { return false }
        let source = Array(packet[(v4 ? 12 : 8)..<(v4 ? 16 : 24)])
        let destination = Array(packet[(v4 ? 16 : 24)..<(v4 ? 20 : 40)])
        let segment = Array(packet[udpStart...])
        return fold(sum(pseudoHeader(source, destination, segment.count)) + sum(segment)) == 0xffff
    }

    static func pseudoHeader(_ source: [UInt8], _ destination: [UInt8], _ length: Int) -> [UInt8] {
        source + destination + [0, 17] + bytes(UInt16(length))
    }

    static func bytes(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }

    static func sum(_ bytes: [UInt8]) -> UInt32 {
        stride(from: 0, to: bytes.count, by: 2).reduce(UInt32(0)) {
            $0 + (UInt32(bytes[$1]) << 8 | ($1 + 1 < bytes.count ? UInt32(bytes[$1 + 1]) : 0))
        }
    }

    static func fold(_ value: UInt32) -> UInt16 {
        var value = value
        while value >> 16 != 0 { value = (value & 0xffff) + (value >> 16) }
        return UInt16(value)
    }

    /// A client packet whose payload carries the 32-bit sequence number `n` (then filler up to 64 bytes).
    static func numbered(_ n: Int, v6: Bool = false, port: UInt16 = 40_000) -> [UInt8] {
        let payload = withUnsafeBytes(of: UInt32(n).bigEndian, Array.init) + [UInt8](repeating: 0x5a, count: 60)
        return v6
            ? udp(from: client6, port, to: server6, 4433, payload: payload)
            : udp(from: client4, port, to: server4, 4433, payload: payload)
    }

    static func sequenceNumber(_ packet: [UInt8]) -> Int {
        let start = packet[0] >> 4 == 4 ? 28 : 48
        return packet[start..<(start + 4)].reduce(0) { $0 << 8 | Int($1) }
    }

    static func drain(_ line: inout DelayLine) -> [(DelayLine.Direction, [UInt8])] {
        var out: [(DelayLine.Direction, [UInt8])] = []
        while let deadline = line.nextDeadline { out += line.due(now: deadline) }
        return out
    }

    @Test(arguments: [0.3, 0.9])
    func burstLimitedLossNeverDropsMoreThanThreeInARow(rate: Double) {
        var line = DelayLine(oneWayDelay: 5, lossRate: rate, seed: 42)
        line.impair(Impairments(maximumBurst: 3), at: 0)
        for n in 0..<20_000 { line.enqueue(packet: Self.numbered(n), direction: .clientToServer, now: UInt64(n)) }
        let kept = Self.drain(&line).map { Self.sequenceNumber($0.1) }
        let gaps = zip([-1] + kept, kept + [20_000]).map { $1 - $0 - 1 }
        #expect(gaps.max()! <= 3, "a burst of \(gaps.max()!) losses")
        #expect(gaps.contains(3), "bursts of 3 do happen")
        let lost = 20_000 - kept.count
        #expect(UInt64(lost) == line.counters.lost)
        // With burst 3 the real loss is below the drawn rate (≈29.4 % at 30 %, ≈60 % at 90 %).
        #expect(Double(lost) / 20_000 < rate && Double(lost) / 20_000 > rate * 0.6, "lost \(lost)")
    }

    @Test(arguments: [false, true])
    func corruptionChangesOneEarlyPayloadByteAndKeepsChecksumsValid(v6: Bool) {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 9)
        line.impair(Impairments(corruptionRate: 1), at: 0)
        let sent = (0..<500).map { Self.numbered($0, v6: v6) }
        for packet in sent { line.enqueue(packet: packet, direction: .clientToServer, now: 0) }
        let received = Self.drain(&line).map(\.1)
        #expect(received.count == sent.count && line.counters.corrupted == 500)
        let payloadStart = v6 ? 48 : 28
        var offsets = Set<Int>()
        for (before, after) in zip(sent, received) {
            let changed = (0..<before.count).filter { before[$0] != after[$0] }
            let inPayload = changed.filter { $0 >= payloadStart }
            #expect(inPayload.count == 1, "exactly one payload byte changed")
            offsets.formUnion(inPayload.map { $0 - payloadStart })
            #expect(changed.allSatisfy { $0 >= payloadStart || $0 == payloadStart - 2 || $0 == payloadStart - 1 })
            #expect(Self.checksumsVerify(after), "the packet still reaches the socket")
        }
        #expect(offsets.max()! < 50 && offsets.count > 40, "offsets spread over the first 50 bytes")
    }

    @Test func corruptionRespectsTheBurstLimitAndLeavesVersionNegotiationAlone() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 3)
        line.impair(Impairments(maximumBurst: 3, corruptionRate: 1), at: 0)
        for n in 0..<40 { line.enqueue(packet: Self.numbered(n), direction: .serverToClient, now: 0) }
        #expect(line.counters.corrupted == 30, "three corrupted, one intact, and again")
        let versionNegotiation = Self.udp(
            from: Self.server4, 4433, to: Self.client4, 40_000, payload: [0x80, 0, 0, 0, 0, 1, 7, 1, 8, 0, 0, 0, 1])
        var fresh = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 3)
        fresh.impair(Impairments(corruptionRate: 1), at: 0)
        fresh.enqueue(packet: versionNegotiation, direction: .serverToClient, now: 0)
        #expect(Self.drain(&fresh).map(\.1) == [versionNegotiation] && fresh.counters.corrupted == 0)
    }

    @Test func blackholeDropsBothDirectionsInsideItsWindowsOnly() {
        var line = DelayLine(oneWayDelay: 1_000, lossRate: 0, seed: 1)
        let second: UInt64 = 1_000_000_000
        line.impair(Impairments(blackhole: BlackholeSchedule(start: 5 * second, duration: 2 * second)), at: second)
        var expected: [Int] = []
        for n in 0..<100 {
            let now = UInt64(n) * second / 10  // 0 ... 9.9 s; the outage is 6 s ..< 8 s
            if now < 6 * second || now >= 8 * second { expected.append(n) }
            line.enqueue(packet: Self.numbered(n), direction: n % 2 == 0 ? .clientToServer : .serverToClient, now: now)
        }
        #expect(Self.drain(&line).map { Self.sequenceNumber($0.1) } == expected)
        #expect(line.counters.blackholed == 20)

        let periodic = BlackholeSchedule(start: 5, duration: 2, period: 7)
        #expect((0..<20).filter { periodic.isDark(at: $0) } == [5, 6, 12, 13, 19])
    }

    @Test func dropListDropsClientDatagramsTwoThroughSeven() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        line.impair(Impairments(dropClientDatagrams: Set(2...7)), at: 0)
        for n in 1...10 {
            line.enqueue(packet: Self.numbered(n), direction: .clientToServer, now: UInt64(n))
            line.enqueue(packet: Self.numbered(100 + n), direction: .serverToClient, now: UInt64(n))
        }
        let out = Self.drain(&line)
        #expect(out.filter { $0.0 == .clientToServer }.map { Self.sequenceNumber($0.1) } == [1, 8, 9, 10])
        #expect(out.filter { $0.0 == .serverToClient }.count == 10, "server datagrams untouched")
        #expect(line.counters.dropListed == 6 && line.dropped == 6)
        #expect(line.counters.clientToServer.packets == 10 && line.counters.clientToServer.delivered == 4)
        #expect(line.counters.clientToServer.udp4 == 10 && line.counters.serverToClient.udp6 == 0)
    }

    @Test func ecnMarksAreCountedPerDirection() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        for (index, mark) in [0, 1, 2, 3, 2].enumerated() {
            var packet = Self.numbered(index)
            packet[1] = UInt8(mark)
            line.enqueue(packet: packet, direction: .clientToServer, now: 0)
            var packet6 = Self.numbered(index, v6: true)
            packet6[1] = UInt8(mark << 4)
            line.enqueue(packet: packet6, direction: .serverToClient, now: 0)
        }
        #expect(line.counters.clientToServer.ect == 3 && line.counters.clientToServer.ce == 1)
        #expect(line.counters.serverToClient.ect == 3 && line.counters.serverToClient.ce == 1)
    }

    @Test func reorderedPacketsAreOvertakenButAllArrive() {
        var line = DelayLine(oneWayDelay: 1_000, lossRate: 0, seed: 5)
        line.impair(Impairments(reorderRate: 0.2, reorderDelay: 5_000), at: 0)
        for n in 0..<1_000 { line.enqueue(packet: Self.numbered(n), direction: .clientToServer, now: UInt64(n) * 100) }
        let order = Self.drain(&line).map { Self.sequenceNumber($0.1) }
        #expect(order.sorted() == Array(0..<1_000), "nothing lost or duplicated")
        #expect(order != Array(0..<1_000))
        #expect(line.counters.reordered > 150 && line.counters.reordered < 250)
        let overtaken = zip(order, order.dropFirst()).filter { $0 > $1 }.count
        #expect(overtaken > 0)
    }

    @Test(arguments: [false, true])
    func natRebindsOnScheduleAndDeletesTheOldMapping(v6: Bool) throws {
        let client = v6 ? Self.client6 : Self.client4
        let server = v6 ? Self.server6 : Self.server4
        for rewriteAddress in [false, true] {
            var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 77)
            line.impair(
                Impairments(nat: NATRebinding(firstRebind: 2_000, interval: 5_000, rewriteAddress: rewriteAddress)),
                at: 1_000)
            var seen: [UDPPacket.Endpoint] = []
            for now in stride(from: UInt64(1_000), to: 14_000, by: 500) {
                line.enqueue(packet: Self.numbered(0, v6: v6), direction: .clientToServer, now: now)
                let (_, out) = try #require(line.due(now: now).first)
                #expect(Self.checksumsVerify(out))
                let source = UDPPacket.endpoint(out, udp: v6 ? 40 : 20, source: true)
                if seen.last != source { seen.append(source) }
            }
            // Rebinds at 3 000, 8 000 and 13 000 (origin 1 000): four public endpoints.
            #expect(seen.count == 4 && line.counters.rebinds == 3)
            #expect(seen.first == UDPPacket.Endpoint(address: client, port: 40_000), "identity before the first")
            #expect(seen.allSatisfy { $0.address.prefix(client.count - 2) == client.prefix(client.count - 2) })
            #expect(Set(seen.map(\.address)).count == (rewriteAddress ? 4 : 1))
            #expect(line.counters.clientAddressesSeen.count == (rewriteAddress ? 4 : 1))

            // The server answers the current public endpoint: delivered to the real one. The old one: dropped.
            let current = try #require(seen.last)
            line.enqueue(
                packet: Self.udp(from: server, 4433, to: current.address, current.port, payload: [1, 2, 3]),
                direction: .serverToClient, now: 14_000)
            let (_, back) = try #require(line.due(now: 14_000).first)
            #expect(UDPPacket.endpoint(back, udp: v6 ? 40 : 20, source: false).port == 40_000)
            #expect(Array(back[(v6 ? 24 : 16)..<(v6 ? 40 : 20)]) == client && Self.checksumsVerify(back))
            let old = seen[1]
            line.enqueue(
                packet: Self.udp(from: server, 4433, to: old.address, old.port, payload: [4]),
                direction: .serverToClient, now: 14_000)
            #expect(line.due(now: 14_000).isEmpty && line.counters.natDropped == 1)
        }
    }

    /// QUIC v1 long header: type, DCID, SCID, (Initial: token), Length, then `body` bytes.
    static func longHeader(type: UInt8, scid: [UInt8], token: [UInt8] = [], body: Int) -> [UInt8] {
        var packet: [UInt8] = [0xc0 | type << 4, 0, 0, 0, 1, 8] + [UInt8](repeating: 0xdd, count: 8)
        packet += [UInt8(scid.count)] + scid
        if type == 0 { packet += [UInt8(token.count)] + token }
        return packet + [0x40 | UInt8(body >> 8), UInt8(body & 0xff)] + [UInt8](repeating: 0xee, count: body)
    }

    @Test func wireTallyReadsHandshakesRetryTokensAndAmplification() {
        var line = DelayLine(oneWayDelay: 0, lossRate: 0, seed: 1)
        func client(_ payload: [UInt8]) {
            line.enqueue(
                packet: Self.udp(from: Self.client4, 40_000, to: Self.server4, 4433, payload: payload),
                direction: .clientToServer, now: 0)
        }
        func server(_ payload: [UInt8]) {
            line.enqueue(
                packet: Self.udp(from: Self.server4, 4433, to: Self.client4, 40_000, payload: payload),
                direction: .serverToClient, now: 0)
        }
        let token: [UInt8] = [9, 9, 9, 9]
        client(Self.longHeader(type: 0, scid: [1], body: 1_100))
        server([0xf0, 0, 0, 0, 1, 1, 1, 4, 7, 7, 7, 7] + token + [UInt8](repeating: 0, count: 16))  // Retry
        client(Self.longHeader(type: 0, scid: [1], token: token, body: 1_100))
        let serverFlight =
            Self.longHeader(type: 0, scid: [5, 5], body: 100) + Self.longHeader(type: 2, scid: [5, 5], body: 900)
        server(serverFlight)
        client(Self.longHeader(type: 2, scid: [1], body: 50) + [0x40, 1, 2, 3])  // Handshake, then 1-RTT
        server([0x40] + [UInt8](repeating: 0, count: 30))
        let wire = line.wire
        #expect(wire.clientInitials == 2 && wire.clientInitialsWithRetryToken == 1)
        #expect(wire.retryTokens == [token] && wire.handshakes == 1 && wire.serverConnectionIDs == [[5, 5]])
        #expect(wire.serverHandshakeBytes[[5, 5]] == 900 + 19, "header (19 bytes) and body")
        #expect(wire.validated && wire.versionNegotiations == 0)
        #expect(wire.clientBytesBeforeValidation == 1_119 + 1_123, "the two Initials")
        #expect(wire.serverBytesBeforeValidation == 32 + serverFlight.count, "Retry and the first flight")
    }
}
