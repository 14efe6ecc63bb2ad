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
        #expect(tls.antiReplayStore?.counters.accepted == 1)
        #expect((tls.antiReplayStore?.counters.duplicates ?? 0) >= 1)
        let handshakesAfter = net.serverEvents.values.filter { events in
            events.contains { if case .handshakeCompleted = $0 { true } else { false } }
        }.count
        #expect(handshakesAfter == handshakesBefore + 1, "no replayed connection completed its handshake")
    }

    @Test func theAntiReplayStoreFailsClosed() throws {
        let store = AntiReplayStore(capacity: 2, windowSeconds: 1000)
        store.now = { 1000 }
        let (one, two, three) = (Self.ticket(1), Self.ticket(2), Self.ticket(3))
        #expect(store.issue(one) && store.issue(two))
        #expect(!store.issue(three), "budget spent: the third ticket gets no 0-RTT")
        #expect(store.redeem(one))
        #expect(!store.redeem(one), "a second use of a ticket is a replay")
        #expect(!store.redeem(three), "a ticket issued over budget never carries 0-RTT")
        store.now = { 2000 }  // the first two tickets' windows ended: room again
        #expect(!store.redeem(two), "expired")
        #expect(store.issue(three))
        #expect(
            store.counters
                == .init(issued: 3, overBudget: 1, accepted: 1, duplicates: 1, expired: 1, unknown: 1))
    }

    static func ticket(_ value: UInt8) -> TicketDigest { TicketDigest(digestBytes: [value]) }
}
