import Foundation
import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

private let emulation = EmulatedNetwork.isAvailable()

/// On an emulated 200 ms path: a suspended listener woken with a ticket sends its join and catch-up in 0-RTT, and
/// the relay answers with the burst's buffered frames at 0.5-RTT — the first frame arrives about one round trip
/// after the phone's network start, where an answer after the handshake would take two. With an immediate
/// authenticator the relay acts on the flight in the loop turn that read it; with one that may wait, through the
/// connection's task; a credential the immediate check refuses leaves the flight to the task, which refuses it.
@Suite(
    "Talk groups: catch-up answered at 0.5-RTT", .serialized,
    .enabled(if: emulation.0, Comment(rawValue: "emulation unavailable: \(emulation.1)")), .integration)
struct TalkGroupHalfRTTTests {
    static let rtt = Duration.milliseconds(300)

    @Test func theFirstBufferedFrameArrivesBeforeA1RTTAnswerCould() async throws {
        try await wakeAListener(admission: .waiting) { relay, listener, burst, elapsed in
            try Self.expectHalfRTTAnswer(relay, listener, burst, elapsed)
            let statistics = try #require(relay.channel(of: "dispatch")?.catchUpStatistics)
            #expect(statistics.startedInFirstFlightTurn == 0, "an authenticator that may wait: the task answers")
        }
    }

    @Test func anImmediateCheckAnswersTheFirstFlightInTheLoopTurnThatReadIt() async throws {
        try await wakeAListener(admission: .immediate) { relay, listener, burst, elapsed in
            try Self.expectHalfRTTAnswer(relay, listener, burst, elapsed)
            let statistics = try #require(relay.channel(of: "dispatch")?.catchUpStatistics)
            #expect(statistics.startedInFirstFlightTurn == 1, "join and catch-up acted on in the loop: \(statistics)")
            #expect(statistics.started == 1, "the task did not start the catch-up a second time: \(statistics)")
            #expect(
                await listener.waitForEvent { $0.contains { if case .catchUpStarted = $0 { true } else { false } } })
            #expect(relay.member(try MemberIdentity("bob"))?.presence == .connected)
        }
    }

    @Test func aCredentialTheImmediateCheckRefusesIsLeftToTheTaskWhichRefusesIt() async throws {
        try await wakeAListener(admission: .immediateRefusingTheWake) { relay, listener, _, _ in
            #expect(
                await listener.waitForEvent {
                    $0.contains { if case .refused(let error) = $0 { error.code == .unauthenticated } else { false } }
                })
            let statistics = try #require(relay.channel(of: "dispatch")?.catchUpStatistics)
            #expect(statistics.startedInFirstFlightTurn == 0, "\(statistics)")
            #expect(statistics.framesSent == 0, "nothing replayed to a refused join: \(statistics)")
            #expect(listener.frames.withLock { $0.isEmpty })
        }
    }

    enum Admission { case waiting, immediate, immediateRefusingTheWake }

    /// The first buffered frame came at 0.5-RTT: one round trip after the network start, never two; every frame
    /// of the burst once, in order.
    private static func expectHalfRTTAnswer(
        _ relay: TalkGroupRelay, _ listener: RecordedPhone, _ burst: UInt64, _ elapsed: Duration
    ) throws {
        #expect(Array(listener.sequences(of: burst).prefix(10)) == Array(UInt32(0)..<10))
        #expect(listener.phone.link.connection?.resumption == .resumed(earlyData: .accepted))
        // One round trip carries the first flight and the 0.5-RTT answer; an answer sent only once the handshake
        // completed needs a second (the client's Finished, then the answer), so sooner than two proves 0.5-RTT. The
        // whole second round trip is the margin a loaded machine's scheduling may take (half of it was not).
        #expect(elapsed < Self.rtt * 2, "first buffered frame \(elapsed) after the network start")
        #expect(elapsed >= Self.rtt, "no frame can come back sooner than a round trip")
        let statistics = try #require(relay.channel(of: "dispatch")?.catchUpStatistics)
        #expect(statistics.framesSentBeforeHandshake > 0, "sent before the phone's handshake completed: \(statistics)")
        // The relay's share, timed from the loop turn the first flight arrived: one delay per 0.5-RTT catch-up.
        #expect(statistics.firstFrameDelays.count == 1, "\(statistics)")
        #expect(statistics.firstFrameDelays.allSatisfy { $0 > .zero }, "\(statistics)")
    }

    /// A listener joins, suspends, is woken with the ticket of a 10-frame burst and (admitted) hears it; `check`
    /// gets the relay, the listener, the burst and the time from its network start to its first frame (zero when
    /// none came within 10 s).
    private func wakeAListener(
        admission: Admission,
        check: @escaping @Sendable (TalkGroupRelay, RecordedPhone, UInt64, Duration) async throws -> Void
    ) async throws {
        let network = try EmulatedNetwork.create(rttMilliseconds: 300, loss: 0, serverTCPFastOpen: false)
        defer { network.close() }
        let serverLoop = try network.withNamespace(.server) { try EventLoop(name: "halfrtt-relay") }
        let clientLoop = try network.withNamespace(.client) { try EventLoop(name: "halfrtt-phones") }
        defer { clientLoop.shutdown() }
        var configuration = Fixtures.serverConfiguration(listen: "\(EmulatedNetwork.serverAddress):0")
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration, loop: serverLoop)
        let address = try #require(server.quicAddress)
        let hook = RecordingWakeSender()
        let relayConfiguration = TalkGroupRelay.Configuration(
            identity: RelayIdentity(serverName: "localhost", port: address.port))
        let revoked = Locked(false)  // bob's credential, revoked while his phone is suspended
        let relay =
            switch admission {
            case .waiting:
                TalkGroupRelay(
                    server: server, configuration: relayConfiguration, authenticator: { _ in true }, wakeSender: hook)
            case .immediate, .immediateRefusingTheWake:
                TalkGroupRelay(
                    server: server, configuration: relayConfiguration,
                    immediateAuthenticator: { request in request.user.user != "bob" || !revoked.withLock { $0 } },
                    wakeSender: hook)
            }
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
            if admission == .immediateRefusingTheWake { revoked.withLock { $0 = true } }

            let networkStart = ContinuousClock.now
            try await listener.phone.wake(ticket: ticket)
            if admission != .immediateRefusingTheWake {
                #expect(await eventually { listener.sequences(of: burst).count >= 10 })
            }
            let first = listener.frames.withLock { $0.first }
            try await check(relay, listener, burst, first.map { $0.receivedAt - networkStart } ?? .zero)
            listener.phone.stop()
            talker.phone.stop()
        }
        running.cancel()
        await server.shutdown()
    }
}
