import PTTTransport
import TestSupport
import Testing
import TransportCore

/// The one outbound datagram queue, end to end on both paths: a frame is checked once, where the application
/// offers it (a bad one throws and is not counted anywhere); a frame whose `expiresAfter` passed before the
/// transport took it is dropped and counted in `datagramsExpired`, never sent; a fresh one is sent and echoed.
@Suite("One datagram queue on both paths", .integration)
struct DatagramQueueTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func staleFramesAreCountedAndBadFramesThrowOnce(policy: FallbackPolicy) async throws {
        let (server, address, relay) = try await TCPFallbackTests.dualServer()
        defer { relay.cancel() }
        try await withTimeout(.seconds(60)) {
            let connection = try await TCPFallbackTests.client(policy).connect(to: address)
            #expect(connection.path == (policy == .tcpOnly ? .tcp : .quic))
            let maximum = connection.maxDatagramPayloadSize
            #expect(maximum > 0)
            for bad in [[], [UInt8](repeating: 1, count: maximum + 1)] {
                do {
                    try connection.sendDatagram(bad)
                    Issue.record("a datagram of \(bad.count) bytes was accepted (maximum \(maximum))")
                } catch let error as TransportError {
                    #expect([.datagramEmpty, .datagramTooLarge].contains(error.code), "\(error)")
                }
            }

            // Already stale when the event loop reaches them: dropped and counted, not sent.
            let stale = 20
            for index in 0..<stale { try connection.sendDatagram([UInt8(index), 1], expiresAfter: .zero) }
            var statistics = await connection.statistics()
            while statistics.datagramsExpired < UInt64(stale) {
                try await Task.sleep(for: .milliseconds(10))
                statistics = await connection.statistics()
            }
            #expect(statistics.datagramsExpired == UInt64(stale))
            #expect(statistics.datagramsSent == 0)
            #expect(statistics.datagramsRejected == 0)

            // A fresh one (generous expiry) goes out and comes back. A datagram is unreliable (a loaded machine may
            // overflow a socket buffer): sent again each second until one echo is back.
            let fresh: [UInt8] = [0xF0, 0x0D]
            let echoed = Locked(false)
            let reader = Task {
                for await datagram in connection.datagrams where datagram.payload == fresh {
                    echoed.withLock { $0 = true }
                    return
                }
            }
            defer { reader.cancel() }
            var sent: UInt64 = 0
            while !echoed.withLock({ $0 }) {
                try connection.sendDatagram(fresh, expiresAfter: .seconds(30))
                sent += 1
                for _ in 0..<100 where !echoed.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
            }
            statistics = await connection.statistics()
            #expect((1...sent).contains(statistics.datagramsSent), "fresh frames sent, the stale ones never")
            #expect(statistics.datagramsExpired == UInt64(stale))
            await connection.close()
        }
        await server.shutdown()
    }
}
