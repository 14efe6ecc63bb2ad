import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// The talk-group relay end to end, in this process over real sockets: members by identity, presence, the wake hook,
/// the burst buffer with catch-up in the first flight, over QUIC and TCP.
@Suite("Talk-group relay: wake to voice", .serialized, .integration)
struct TalkGroupRelayTests {
    static let frame = [UInt8](repeating: 0x55, count: 60)

    /// Sends `count` frames 20 ms apart (a voice call's pace) in the talker's burst. Frames wait up to 5 s to be sent
    /// (live audio would be dropped after 100 ms): a test on a loaded machine stalls longer than a phone, and these
    /// tests are about which frames the relay delivers, not about stale audio.
    static func talk(_ talker: RecordedPhone, _ count: Int, from start: Int = 0) async throws {
        let clock = ContinuousClock()
        var next = clock.now
        for index in start..<(start + count) {
            try talker.phone.sendAudio(frame, last: false, expiresAfter: .seconds(5))
            _ = index
            next = next.advanced(by: .milliseconds(20))
            try await Task.sleep(until: next)
        }
    }

    /// A granted floor, its burst.
    static func grant(_ talker: RecordedPhone) async throws -> UInt64 {
        guard case .granted(let burst) = try await talker.phone.requestFloor() else {
            throw TransportError(.internalError, "the floor was not granted")
        }
        return burst
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aListenerWokenMidBurstHearsItAllFromTheFirstFrame(path: FallbackPolicy) async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            // The listener joins once (its session is kept), then its app is suspended.
            let session = Locked<ResumptionState?>(nil)
            let store = ResumptionStore(
                load: { session.withLock { $0 } }, save: { state in session.withLock { $0 = state } })
            let sleeper = try bed.phone("bob", path: path, token: "bob-token", resumption: store)
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            #expect(await eventually { bed.relay.member(try! MemberIdentity("bob"))?.presence == .suspended })

            let talker = try bed.phone("alice", path: path)
            #expect(await talker.joined())
            let burst = try await Self.grant(talker)
            // The wake hook was handed the suspended member with its address, at the request.
            #expect(await eventually { !bed.hook.requests.withLock { $0.isEmpty } })
            let request = try #require(bed.hook.requests.withLock { $0.first })
            #expect(request.burst == burst && request.talker.user == "alice" && request.group == "dispatch")
            #expect(request.members.map(\.identity.user) == ["bob"])
            #expect(request.members.first?.address.token == "bob-token")
            #expect(request.relay == RelayIdentity(serverName: "localhost", port: bed.address.port))

            // 40 frames pass while the push travels; then the phone wakes with the ticket, and the talker goes on.
            try await Self.talk(talker, 40)
            // The relay holds them all before the phone wakes (a loaded machine may still be forwarding the last).
            #expect(await eventually { (bed.relay.channel(of: "dispatch")?.heldBurst?.next ?? 0) >= 40 })
            let woken = Task { try await sleeper.phone.wake(ticket: request.ticket) }
            try await Self.talk(talker, 60, from: 40)
            try await woken.value
            #expect(
                await eventually { sleeper.sequences(of: burst).count >= 100 }, "\(sleeper.sequences(of: burst).count)")
            #expect(sleeper.sequences(of: burst) == Array(0..<100), "every frame once, in order, across the seam")
            if path == .quicOnly {
                #expect(sleeper.phone.link.connection?.resumption == .resumed(earlyData: .accepted))
            }
            let catchUps = try #require(bed.relay.channel(of: "dispatch")?.catchUpStatistics)
            #expect(catchUps.started == 1 && catchUps.caughtUp == 1, "\(catchUps)")
            #expect(catchUps.framesSent >= 40 && catchUps.framesSent < 100, "\(catchUps)")
            #expect(bed.relay.member(try MemberIdentity("bob"))?.presence == .connected)
            try await talker.phone.releaseFloor()
        }
        await bed.shutdown()
    }

    @Test func aListenerWokenAfterTheBurstEndedStillHearsItAll() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            let sleeper = try bed.phone("bob", token: "bob-token")
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            let talker = try bed.phone("alice")
            #expect(await talker.joined())
            let burst = try await Self.grant(talker)
            try await Self.talk(talker, 30)
            try await talker.phone.releaseFloor()
            #expect(await talker.waitForEvent { $0.contains { if case .released = $0 { true } else { false } } })
            let ticket = try #require(bed.hook.requests.withLock { $0.first }).ticket
            try await sleeper.phone.wake(ticket: ticket)
            #expect(await eventually { sleeper.sequences(of: burst).count >= 30 })
            #expect(sleeper.sequences(of: burst) == Array(0..<30))
            #expect(
                sleeper.events.withLock { $0 }.contains {
                    if case .catchUpStarted(burst, 0, 30) = $0 { true } else { false }
                })
        }
        await bed.shutdown()
    }

    @Test func aUsersSecondConnectionReplacesTheFirst() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            let first = try bed.phone("bob")
            #expect(await first.joined())
            let second = try bed.phone("bob")
            #expect(await second.joined())
            // The first connection was closed by the relay with replacedCloseCode; its phone stopped.
            #expect(await first.waitForEvent { $0.contains(.replaced) })
            #expect(await eventually { if case .stopped = first.phone.link.status { true } else { false } })
            let talker = try bed.phone("alice")
            #expect(await talker.joined())
            let burst = try await Self.grant(talker)
            try await Self.talk(talker, 20)
            #expect(await eventually { second.sequences(of: burst).count == 20 })
            #expect(first.sequences(of: burst).isEmpty, "no double delivery")
            #expect(bed.relay.members(of: "dispatch").map(\.identity.user) == ["alice", "bob"])
        }
        await bed.shutdown()
    }

    @Test func presenceFollowsTheConnectionAndTheGateway() async throws {
        let bed = try await TalkGroupBed()
        let bob = try MemberIdentity("bob")
        try await withTimeout(.seconds(60)) {
            let phone = try bed.phone("bob", token: "bob-token")
            #expect(await phone.joined())
            #expect(bed.relay.member(bob)?.presence == .connected)
            await phone.phone.suspend()
            #expect(await eventually { bed.relay.member(bob)?.presence == .suspended })
            // Connected again, then gone without a clean close (a non-zero code here): unreachable.
            try await phone.phone.wake()
            #expect(await eventually { bed.relay.member(bob)?.presence == .connected })
            await phone.phone.link.connection?.close(code: 9, reason: "vanished")
            #expect(await eventually { bed.relay.member(bob)?.presence == .unreachable })
            #expect(bed.relay.member(bob)?.wakeAddress?.token == "bob-token", "still woken: the phone may be back")
            phone.phone.stop()
            // The gateway reports the token dead: the member stays, not woken any more.
            bed.relay.reportUndeliverable(bob)
            #expect(bed.relay.member(bob)?.wakeAddress == nil)
            #expect(bed.relay.members(of: "dispatch").count == 1)
            #expect(bed.relay.member(bob)!.unchangedFor < .seconds(5))
        }
        await bed.shutdown()
    }

    @Test func membershipExpiresWhileAway() async throws {
        let bed = try await TalkGroupBed(configure: { $0.membershipLifetime = .milliseconds(300) })
        try await withTimeout(.seconds(30)) {
            let phone = try bed.phone("bob")
            #expect(await phone.joined())
            await phone.phone.suspend()
            #expect(await eventually(within: .seconds(20)) { bed.relay.members(of: "dispatch").isEmpty })
        }
        await bed.shutdown()
    }
}
