import Testing

@testable import TransportCore

/// A server with several event loops gives each loop its own TLS context but one anti-replay store: a 0-RTT first
/// flight accepted by one loop and replayed to another (the kernel hashes a new source port anywhere) is refused
/// there. A context with a store of its own (another process sharing the ticket key) never recorded the ticket, so
/// it refuses the flight's early data too: a ticket carries 0-RTT only where it was issued.
@Suite("0-RTT replay protection across a server's loops (sans-IO)")
struct SharedAntiReplayTests {
    static func context(store: AntiReplayStore?) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey),
            ticketKey: ZeroRTTTests.ticketKey, earlyDataWindow: 3_600_000, antiReplayStore: store)
    }

    /// Early messages equal to `message` that a server fed `flight` delivered to its application.
    static func deliveries(of message: [UInt8], replaying flight: [[UInt8]], to tls: TLSServerContext) throws -> Int {
        let net = try VirtualNetwork(tls: tls)
        var deliveries = 0
        net.onServerEvent = { _, event in
            if case .streamData(_, let bytes, _, _) = event, bytes == message { deliveries += 1 }
        }
        for packet in flight { net.inject(packet, fromClient: 100) }
        net.run(for: 5 * nanosecondsPerSecond)
        return deliveries
    }

    @Test func aFirstFlightReplayedToAnotherLoopIsRefused() throws {
        let shared = AntiReplayStore(capacity: 1000, windowSeconds: 3600)
        // Every context exists before the ticket is issued (GnuTLS refuses tickets older than its context).
        let loopA = try Self.context(store: shared)
        let loopB = try Self.context(store: shared)
        let otherProcess = try Self.context(store: nil)
        let net = try VirtualNetwork(tls: loopA)
        let message = Array("join channel 7".utf8)
        var deliveredOnA = 0
        net.onServerEvent = { connection, event in
            if case .streamData(let id, let bytes, let fin, _) = event {
                if bytes == message { deliveredOnA += 1 }
                try? connection.write(stream: id, bytes, fin: fin)
            }
        }
        let saved = try ZeroRTTTests.firstConnection(net)
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, message, fin: true)
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        #expect(client.earlyDataAccepted == true)
        #expect(deliveredOnA == 1)
        let flight = net.firstFlight(client: 1)
        #expect(!flight.isEmpty)

        #expect(try Self.deliveries(of: message, replaying: flight, to: loopB) == 0, "loop B shares A's store")
        #expect(shared.counters.accepted == 1)
        #expect(shared.counters.duplicates >= 1)
        #expect(
            try Self.deliveries(of: message, replaying: flight, to: otherProcess) == 0,
            "another process never recorded the ticket, so it refuses its early data too")
    }

    @Test func theStoreRunsEveryAccessThroughItsSerializer() {
        final class Count: @unchecked Sendable {
            // @unchecked Sendable invariant: used by this test's one thread only.
            var value = 0
        }
        let count = Count()
        let store = AntiReplayStore(capacity: 4, windowSeconds: 60) { body in
            count.value += 1
            body()
        }
        #expect(store.issue(ReplayTests.ticket(1)))
        #expect(store.redeem(ReplayTests.ticket(1)))
        #expect(!store.redeem(ReplayTests.ticket(1)))
        #expect(store.counters.duplicates == 1)
        #expect(count.value == 4)
    }
}
