import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// A relay upgraded (or reconfigured) with narrower windows, same ticket key: a phone woken with a ticket from before
/// must still connect and be heard. QUIC and QMux clients remember the relay's limits for 0-RTT and must not accept
/// less (RFC 9000 §7.4.1), so a relay must never accept early data under a ticket whose limits it no longer offers.
/// Today a restarted relay refuses all early data from tickets it did not issue (the 0-RTT budget lives in the
/// issuing process), so the wake resumes in 1-RTT; this test keeps that true when a shared anti-replay store lets
/// restarted relays accept 0-RTT.
@Suite("A relay with narrower windows than its tickets remember", .integration)
struct UpgradedRelayWakeTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aWokenClientWithAnOlderTicketStillConnectsAndEchoes(policy: FallbackPolicy) async throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-key-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let client = TCPFallbackTests.client(policy)
        var (configuration, address, saved) = try await ticketFromARelayThatWentAway(keyFile: keyFile, client: client) {
            $0.maximumMessageSize = 256 * 1024
        }
        configuration.maximumMessageSize = 16 * 1024  // the upgrade: windows a sixteenth of what the ticket saw
        let upgraded = try await Fixtures.rebind(configuration)
        let relay = Task { await EchoRelay.run(upgraded) }
        defer { relay.cancel() }
        let message = EarlyMessage(Array("read burst".utf8), replaySafe: true)
        let connection = try await client.connect(to: address, resuming: saved, earlyMessages: [message])
        let stream = try #require(connection.earlyStream)
        var iterator = stream.messages.makeAsyncIterator()
        #expect(try await iterator.next()?.bytes == message.bytes, "the woken client's message came back")
        #expect(connection.resumption == .resumed(earlyData: .rejected), "\(connection.resumption)")
        await connection.close()
        await upgraded.shutdown()
    }
}
