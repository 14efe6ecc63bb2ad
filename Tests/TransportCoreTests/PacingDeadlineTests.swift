import Testing

@testable import TransportCore

/// After an application-limited burst (an audio frame to one listener) a connection's next timer is a real one
/// (loss detection, ACK delay, idle), not the pacing deadline of the burst it just wrote: a relay would otherwise run
/// every listener's connection a second time per frame only to clear that deadline. On a virtual clock, both ngtcp2
/// generations.
@Suite("Pacing deadline after an application-limited burst (sans-IO)")
struct PacingDeadlineTests {
    /// A handshake completed and settled (RTT sampled, ticket delivered), then `frames` 80-byte datagrams from the
    /// server, one burst each 20 ms, as a relay forwards a talker's frames. Returns, per burst, the packets written
    /// and how far ahead the server's next timer was right after it; and the datagrams the client received.
    static func frames(_ frames: Int) throws -> (bursts: [(packets: Int, nextTimer: UInt64?)], received: Int) {
        let net = try VirtualNetwork()
        let client = try net.addClient()
        #expect(net.run(until: { client.isHandshakeCompleted && !net.serverConnections.isEmpty }))
        net.run(for: 200 * nanosecondsPerMillisecond)  // the ticket, the token and their ACKs
        let server = try #require(net.serverConnections.first)
        var buffer = [UInt8](repeating: 0, count: 1500)
        var bursts: [(packets: Int, nextTimer: UInt64?)] = []
        for index in 0..<frames {
            try server.sendDatagram([UInt8](repeating: UInt8(index % 256), count: 80))
            let now = net.now
            var packets: [[UInt8]] = []
            while true {
                let length = buffer.withUnsafeMutableBytes { server.writePacket(into: $0, now: now).length }
                if length == 0 { break }
                packets.append(Array(buffer.prefix(length)))
            }
            server.finishWriteBurst(now: now)
            bursts.append((packets.count, server.nextTimeout.map { $0 > now ? $0 - now : 0 }))
            for packet in packets { net.injectToClient(packet) }
            net.run(for: 20 * nanosecondsPerMillisecond)
        }
        let received = net.clientEvents[0].filter { if case .datagram = $0 { true } else { false } }.count
        return (bursts, received)
    }

    @Test func theNextTimerAfterAFrameIsNotThePacingDeadline() throws {
        let (bursts, received) = try Self.frames(50)
        #expect(bursts.allSatisfy { $0.packets >= 1 }, "every frame left in its own burst, pacing held none back")
        #expect(received == 50)
        for (index, burst) in bursts.enumerated() {
            let ahead = try #require(burst.nextTimer, "burst \(index): the connection keeps its loss and idle timers")
            if LinkedNgtcp2.supportsQUICVersion2 {
                // 1.x paces every burst as it computes (the interval ahead; it asserts that timestamps never go
                // back, so no "send now"): that deadline is the next timer, and it is in the future.
                #expect(ahead > 0, "burst \(index): next timer \(ahead) ns after the burst")
            } else {
                // 0.12.1: the "send now" deadline was cleared; the real timers are tens of milliseconds away on
                // a 20 ms RTT.
                #expect(ahead > nanosecondsPerMillisecond, "burst \(index): next timer \(ahead) ns after the burst")
            }
        }
    }
}
