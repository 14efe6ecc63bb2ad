import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import Testing
import TransportCore

/// Leaving a dead relay for another address of its name (issue 33, item 5): a link whose relay went silent (the
/// path to it cut: no ICMP, no close, as a hung relay) reconnects to the name's other address first, instead of
/// trying the silent one again and waiting for that attempt's idle timeout before the next address.
@Suite("TransportLink leaves a dead relay for another address of the name", .integration)
struct LinkDeadRelayTests {
    @Test func aSilentRelayIsTriedLastOnTheReconnect() async throws {
        // Relay one behind a cuttable UDP path on 127.0.0.1:P; relay two on 127.0.0.3:P; the name resolves to both.
        let (first, _, firstRelay) = try await TransportLinkTests.echoRelayAnsweringEarly()
        defer { firstRelay.cancel() }
        let path = try await ChildServer.start(
            try AioquicInteropTests.python, [TransportLinkTests.proxy, "\(first.quicAddress!.port)"])
        defer { path.kill() }
        let port = try #require(ServerAddress(path.address)).port
        var configuration = Fixtures.serverConfiguration(listen: "127.0.0.3:\(port)")
        configuration.earlyData = .enabled()
        let second = try await TransportServer.bind(configuration: configuration)
        let secondRelay = Task { await EchoRelay.run(second) }
        defer { secondRelay.cancel() }

        var clientConfiguration = TransportLinkTests.configuration(
            .quicOnly, idle: .seconds(8), keepAlive: .seconds(1))
        let name = ServerAddress(host: "localhost", port: port)
        clientConfiguration.resolve = [name: ["127.0.0.1", "127.0.0.3"]]
        // Neither the next address's turn nor a handshake timeout moves an attempt at the silent address on: only its
        // idle timeout (8 s) does. Trying the live address first connects at once.
        clientConfiguration.addressAttemptDelay = .seconds(30)
        clientConfiguration.handshakeTimeout = .seconds(30)
        let link = TransportLinkTests.link(
            TransportClient(configuration: clientConfiguration), name,
            backoff: ReconnectBackoff(initial: .milliseconds(100), maximum: .seconds(1)))
        let log = StatusLog(link)
        let before = try await withTimeout { try await link.nextReady() }
        #expect(before.remoteAddress.hasPrefix("127.0.0.1"), "\(before.remoteAddress)")

        kill(path.processIdentifier, SIGUSR1)  // relay one goes silent
        let after = try await TransportLinkTests.replacement(of: before, in: link, within: .seconds(40))
        #expect(after.remoteAddress.hasPrefix("127.0.0.3"), "\(after.remoteAddress)")
        // From the reconnect's start to ready: less than the 8 s an attempt at the silent address first would cost
        // (a local handshake takes milliseconds; the bound only tells the two orders apart).
        let statuses = await log.statuses(once: { entries in
            guard let reconnecting = entries.first(where: { $0.shape == "reconnecting 1" }) else { return false }
            return entries.contains { $0.shape == "ready" && $0.seen > reconnecting.seen }
        })
        let reconnecting = try #require(statuses.first { $0.shape == "reconnecting 1" }, "\(statuses)")
        let ready = try #require(
            statuses.first { $0.shape == "ready" && $0.seen > reconnecting.seen }, "\(statuses)")
        #expect(ready.seen - reconnecting.seen < .seconds(8), "\(statuses.map { "\($0.seen) \($0.status)" })")
        #expect(try await TransportLinkTests.rejoinAnswer(after) == TransportLinkTests.rejoin)
        link.stop()
        await second.shutdown()
        await first.shutdown()
    }
}
