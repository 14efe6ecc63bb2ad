import BenchSupport
import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing
import TransportCore

@testable import PTTTransport

/// A suspended talker's key press: the floor request rides in the wake's 0-RTT first flight beside the join, the relay
/// grants it before the handshake completes (the anti-replay store claimed the ticket), and a replay of that flight
/// gets no grant.
@Suite("Floor request in the 0-RTT first flight", .serialized, .integration)
struct WakeFloorRequestTests {
    private static func taken(_ events: [TalkGroupPhone.Event], by user: String) -> Int {
        events.filter { if case .taken(_, let talker) = $0 { talker.user == user } else { false } }.count
    }

    /// `requestFloor()` on a suspended phone wakes it with the request after the join in 0-RTT: granted, the wake's
    /// early data accepted, and a listener told who talks.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aSuspendedTalkersRequestIsGrantedWithEarlyDataAccepted(_ path: FallbackPolicy) async throws {
        let bed = try await TalkGroupBed()
        do {
            let listener = try bed.phone("listener", path: path)
            let talker = try bed.phone("talker", path: path)
            #expect(await listener.joined())
            #expect(await talker.joined())
            // The first ticket arrives within a round trip of the handshake; the suspension waits for it.
            await talker.phone.suspend()
            #expect(talker.phone.link.status == .suspended)

            let answer = try await withTimeout(.seconds(20)) { try await talker.phone.requestFloor() }
            guard case .granted(let burst) = answer else {
                Issue.record("not granted: \(String(describing: answer))")
                await bed.shutdown()
                return
            }
            #expect(talker.phone.link.connection?.resumption == .resumed(earlyData: .accepted))
            #expect(await listener.waitForEvent { Self.taken($0, by: "talker") == 1 })
            #expect(bed.relay.channel(of: "dispatch")?.talkerIdentity?.user == "talker")
            // The grant is the phone's: its frames reach the listener.
            try talker.phone.sendAudio([1, 2, 3], expiresAfter: .seconds(5))
            #expect(await eventually { !listener.sequences(of: burst).isEmpty })
        }
        await bed.shutdown()
    }

    /// Over QUIC, stepped by hand: a talker's first flight carries its join and floor request in 0-RTT and nothing
    /// more. The relay grants before the talker ever sends its Finished (the listener hears `taken`). Replayed from
    /// new sockets once the original is gone, the flight is refused by the anti-replay store and grants nothing.
    @Test func theRelayGrantsBeforeTheHandshakeAndAReplayedFlightGetsNoGrant() async throws {
        let bed = try await TalkGroupBed()
        do {
            let listener = try bed.phone("listener")
            #expect(await listener.joined())
            let join = TalkGroupMessage.join(
                .init(group: "dispatch", user: try MemberIdentity("woken"), credential: [], wakeAddress: nil))
            let request = TalkGroupMessage.requestFloor(group: "dispatch", priority: 0, emergency: false)
            let first = try await Fixtures.client().connect(
                to: ServerAddress(host: "127.0.0.1", port: bed.address.port))
            let saved = try #require(try await waitForResumptionState(first).quicResumption)
            await first.close()

            let talker = try SteppedTalker(
                port: bed.address.port, resumption: saved, frame: nil, messages: [join.encoded(), request.encoded()])
            // Only the first flight went: the relay acted on the request before its handshake could complete.
            #expect(await listener.waitForEvent { Self.taken($0, by: "woken") == 1 }, "granted in 0-RTT")
            #expect(await bed.server.antiReplayStatistics().accepted == 1)

            // The talker completes its handshake and goes away; its floor is released when its connection ends.
            #expect(await onThread { talker.finishHandshake() })
            await onThread { talker.close() }
            #expect(
                await listener.waitForEvent {
                    $0.contains { if case .released(_, let who, _) = $0 { who.user == "woken" } else { false } }
                })
            // Replayed until it reaches the relay as a new connection (the original's closing period must pass
            // first), which the anti-replay store refuses.
            var refused = false
            for _ in 0..<100 where !refused {
                for _ in 0..<5 { try talker.replayFirstFlight() }
                try await Task.sleep(for: .milliseconds(100))  // polled: the replays reach the loop meanwhile
                refused = await bed.server.antiReplayStatistics().replaysRefused > 0
            }
            #expect(refused, "a replay reached the relay and was refused")
            // Give a wrongly accepted replay time to be acted on: no second grant, nobody talks.
            try await Task.sleep(for: .milliseconds(500))
            #expect(Self.taken(listener.events.withLock { $0 }, by: "woken") == 1, "\(listener.events.withLock { $0 })")
            #expect(bed.relay.channel(of: "dispatch")?.talkerIdentity == nil)
            #expect(await bed.server.antiReplayStatistics().accepted == 1)
        }
        await bed.shutdown()
    }
}
