import Testing

@testable import TransportCore

/// The endpoint's first look at a UDP payload: empty and too-short payloads never reach ngtcp2's decoder
/// (which asserts on length 0), allocate nothing and get no reply.
@Suite("Empty and truncated payloads at the server endpoint (sans-IO)")
struct TinyPacketTests {
    @Test func emptyAndShortPayloadsAreDroppedWithoutReply() throws {
        let net = try VirtualNetwork()
        let server = net.server
        let from = net.clientAddress
        let to = net.serverAddress
        var generator = SystemRandomNumberGenerator()
        let empty = server.receive(
            packet: UnsafeRawBufferPointer(start: nil, count: 0), from: from, to: to,
            now: net.now)
        guard case .drop = empty else {
            Issue.record("an empty payload got \(empty)")
            return
        }
        var storage: [UInt8] = [0xc0]
        let emptyWithBase = storage.withUnsafeBytes {
            server.receive(packet: UnsafeRawBufferPointer(rebasing: $0[0..<0]), from: from, to: to, now: net.now)
        }
        guard case .drop = emptyWithBase else {
            Issue.record("an empty payload got \(emptyWithBase)")
            return
        }
        var count: UInt64 = 2
        // Every first byte, at every length up to 21 (below a short header with an 18-byte connection ID and
        // below the smallest stateless reset): nothing but drops.
        for length in 1...21 {
            for first in 0...255 {
                storage = [UInt8(first)] + (1..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let outcome = storage.withUnsafeBytes { server.receive(packet: $0, from: from, to: to, now: net.now) }
                count += 1
                if case .drop = outcome { continue }
                Issue.record("a \(length)-byte payload starting with \(first) got \(outcome)")
                return
            }
        }
        #expect(server.droppedPackets == count)
        #expect(server.connectionCount == 0)
    }
}
