import Testing

@testable import TransportCore

@Suite("0-RTT replay protection (sans-IO)")
struct ReplayTests {
    @Test func replayedFirstFlightIsAcceptedAtMostOnceAndNeverCompletes() throws {
        let tls = try ZeroRTTTests.serverTLS()
        let net = try VirtualNetwork(tls: tls)
        var deliveries = 0
        let message = Array("send me the pending burst for channel 7".utf8)
        net.onServerEvent = { connection, event in
            if case .streamData(let id, let bytes, let fin, _) = event {
                if bytes == message { deliveries += 1 }
                try? connection.write(stream: id, bytes, fin: fin)
            }
        }
        let saved = try ZeroRTTTests.firstConnection(net)
        let handshakesBefore = net.serverEvents.values.filter { events in
            events.contains { if case .handshakeCompleted = $0 { true } else { false } }
        }.count

        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, message, fin: true)
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        #expect(client.earlyDataAccepted == true)
        let flight = net.firstFlight(client: 1)
        #expect(flight.count >= 1)

        // The original connection ends and the server forgets it, so its connection IDs no longer route.
        client.close(code: 0, reason: "", now: net.now)
        net.run(for: nanosecondsPerSecond)
        for connection in net.serverConnections where connection.closeReason != nil { net.server.remove(connection) }
        // An attacker replays the captured Initial + 0-RTT flight 20 times from other addresses.
        for attacker in 0..<20 {
            for packet in flight { net.inject(packet, fromClient: 100 + attacker) }
        }
        net.run(for: 5 * nanosecondsPerSecond)

        #expect(deliveries == 1, "the application saw the early message exactly once")
        #expect(tls.antiReplayStore?.accepted == 1)
        #expect((tls.antiReplayStore?.duplicates ?? 0) >= 1)
        let handshakesAfter = net.serverEvents.values.filter { events in
            events.contains { if case .handshakeCompleted = $0 { true } else { false } }
        }.count
        #expect(handshakesAfter == handshakesBefore + 1, "no replayed connection completed its handshake")
    }

    @Test func fullAntiReplayStoreFailsClosed() throws {
        let store = AntiReplayStore(capacity: 2)
        store.now = { 1000 }
        #expect(store.add(key: [1], expiry: 2000))
        #expect(!store.add(key: [1], expiry: 2000), "duplicate")
        #expect(store.add(key: [2], expiry: 2000))
        #expect(!store.add(key: [3], expiry: 2000), "full of live entries: refuse")
        store.now = { 3000 }  // the entries expired: room again
        #expect(store.add(key: [3], expiry: 4000))
        #expect(store.refusedFull == 1)
        #expect(store.duplicates == 1)
    }
}
