import Foundation
import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportIO

private let emulation = EmulatedNetwork.isAvailable()

/// On an emulated 200 ms path: a suspended listener woken with a ticket sends its join and catch-up in 0-RTT, and
/// the relay answers with the burst's buffered frames at 0.5-RTT — the first frame arrives about one round trip
/// after the phone's network start, where an answer after the handshake would take two.
@Suite(
    "Talk groups: catch-up answered at 0.5-RTT", .serialized,
    .enabled(if: emulation.0, Comment(rawValue: "emulation unavailable: \(emulation.1)")), .integration)
struct TalkGroupHalfRTTTests {
    static let rtt = Duration.milliseconds(200)

    @Test func theFirstBufferedFrameArrivesBeforeA1RTTAnswerCould() async throws {
        let network = try EmulatedNetwork.create(rttMilliseconds: 200, loss: 0, serverTCPFastOpen: false)
        defer { network.close() }
        let serverLoop = try network.withNamespace(.server) { try EventLoop(name: "halfrtt-relay") }
        let clientLoop = try network.withNamespace(.client) { try EventLoop(name: "halfrtt-phones") }
        defer { clientLoop.shutdown() }
        var configuration = Fixtures.serverConfiguration(listen: "\(EmulatedNetwork.serverAddress):0")
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration, loop: serverLoop)
        let address = try #require(server.quicAddress)
        let hook = RecordingWakeSender()
        let relay = TalkGroupRelay(
            server: server, configuration: .init(identity: RelayIdentity(serverName: "localhost", port: address.port)),
            authenticator: { _ in true }, wakeSender: hook)
        let running = Task { await relay.run() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                fallback: .quicOnly),
            loop: clientLoop)
        try await withTimeout(.seconds(60)) {
            let listener = RecordedPhone(
                try TalkGroupPhone(
                    client: client, relay: address,
                    configuration: .init(
                        user: try MemberIdentity("bob"), group: "dispatch",
                        wakeAddress: try WakeAddress(platform: .apns, token: "b0b"))))
            #expect(await listener.joined())
            await listener.phone.suspend()
            let talker = RecordedPhone(
                try TalkGroupPhone(
                    client: client, relay: address,
                    configuration: .init(user: try MemberIdentity("alice"), group: "dispatch")))
            #expect(await talker.joined())
            let burst = try await TalkGroupRelayTests.grant(talker)
            try await TalkGroupRelayTests.talk(talker, 10)
            #expect(await eventually { relay.channel(of: "dispatch")?.heldBurst?.next == 10 })
            let ticket = try #require(hook.requests.withLock { $0.first }).ticket

            let networkStart = ContinuousClock.now
            try await listener.phone.wake(ticket: ticket)
            #expect(await eventually { listener.sequences(of: burst).count >= 10 })
            let first = try #require(listener.frames.withLock { $0.first })
            #expect(first.header.sequence == 0)
            #expect(listener.phone.link.connection?.resumption == .resumed(earlyData: .accepted))
            let elapsed = first.receivedAt - networkStart
            // One round trip carries the first flight and the 0.5-RTT answer; an answer sent only once the handshake
            // completed would need a second. Half a round trip of margin for this machine's scheduling.
            #expect(elapsed < Self.rtt * 3 / 2, "first buffered frame \(elapsed) after the network start")
            #expect(elapsed >= Self.rtt, "no frame can come back sooner than a round trip")
            let statistics = try #require(relay.channel(of: "dispatch")?.catchUpStatistics)
            #expect(
                statistics.framesSentBeforeHandshake > 0, "sent before the phone's handshake completed: \(statistics)")
            // The relay's share, timed from the loop turn the first flight arrived: one delay per 0.5-RTT catch-up.
            #expect(statistics.firstFrameDelays.count == 1, "\(statistics)")
            #expect(statistics.firstFrameDelays.allSatisfy { $0 > .zero }, "\(statistics)")
            listener.phone.stop()
            talker.phone.stop()
        }
        running.cancel()
        await server.shutdown()
    }
}
