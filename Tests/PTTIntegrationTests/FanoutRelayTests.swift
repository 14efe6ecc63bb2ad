import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// The fan-out relay end to end: one talker, listeners over QUIC and TCP, the relay's own statistics, and the
/// loop-side datagram handler it is built on.
@Suite("Fan-out relay", .integration)
struct FanoutRelayTests {
    @Test func aTalkersFramesReachEveryOtherMemberOnceOnBothPaths() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        let server = try await TransportServer.bind(configuration: configuration)
        let statistics = FanoutStatistics()
        // A frame's lifetime of 30 s: on a loaded machine the relay's loop may be starved past the default 100 ms, and
        // a frame dropped as stale would be a missing frame here (expiry has its own tests).
        let relay = Task { await FanoutRelay.run(server, frameLifetime: .seconds(30), statistics: statistics) }
        defer { relay.cancel() }
        let address = server.quicAddress!
        try await withTimeout(.seconds(90)) {
            let talker = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
            let quicListener = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
            let tcpListener = try await TCPFallbackTests.client(.tcpOnly).connect(to: address)
            #expect(tcpListener.path == .tcp)
            let received = Locked<[String: [[UInt8]]]>([:])
            for (name, listener) in [("quic", quicListener), ("tcp", tcpListener)] {
                await listener.setDatagramHandler { datagram in
                    received.withLock { $0[name, default: []].append(datagram.payload) }
                }
            }
            let echoToTalker = Task { () -> Int in
                var count = 0
                for await _ in talker.datagrams { count += 1 }
                return count
            }
            // Every member joined the channel once a probe from the talker reached both listeners: the relay joins
            // connections in the order it accepted them, the talker's first. A probe is sent again every 500 ms
            // until the latest one arrived at both (earlier ones arrived before it or were never forwarded).
            var probe: UInt8 = 0
            while true {
                try talker.sendDatagram([0xf0, probe])  // two bytes: never one of the 80-byte frames below
                let latest = probe
                let arrived = await eventually(within: .milliseconds(500)) {
                    received.withLock { got in ["quic", "tcp"].allSatisfy { got[$0]?.last == [0xf0, latest] } }
                }
                if arrived { break }
                try #require(probe < 60, "no probe reached both listeners in 30 s: \(received.withLock { $0 })")
                probe += 1
            }
            received.withLock { $0 = [:] }
            _ = statistics.take()
            let frames = (0..<20).map { [UInt8($0)] + [UInt8](repeating: 0xaa, count: 79) }
            for frame in frames {
                try talker.sendDatagram(frame)
                try await Task.sleep(for: .milliseconds(2))
            }
            _ = await eventually(within: .seconds(30)) {
                received.withLock { ($0["quic"]?.count ?? 0) + ($0["tcp"]?.count ?? 0) } >= 40
            }
            let got = received.withLock { $0 }
            #expect(got["quic"] == frames, "QUIC listener: every frame, once, in order")
            #expect(got["tcp"] == frames, "TCP listener: every frame, once, in order")
            let snapshot = statistics.take()
            #expect(snapshot.framesReceived == 20)
            #expect(snapshot.copiesQueued == 40)
            #expect(snapshot.forwardingLatencies.count == 20)
            #expect(!snapshot.forwardingLatencies.contains { $0 < .zero })
            await talker.close()
            #expect(await firstValue(within: .seconds(20), echoToTalker) == 0, "never sent back to the talker")
            await quicListener.close()
            await tcpListener.close()
        }
        await server.shutdown()
    }
}
