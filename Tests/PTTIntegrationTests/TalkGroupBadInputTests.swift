import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Bad input to the talk-group relay gets a typed error and holds nothing, and the relay goes on serving.
@Suite("Talk-group relay: bad input", .serialized, .integration)
struct TalkGroupBadInputTests {
    /// A raw control stream to the relay.
    struct Raw {
        let connection: TransportConnection
        let stream: TransportStream

        init(_ bed: TalkGroupBed) async throws {
            connection = try await TCPFallbackTests.client(.quicOnly).connect(to: bed.address)
            stream = try await connection.openStream()
        }

        /// Sends `bytes` and returns the relay's answer (floor notices to every member, which the join stream also
        /// carries, are skipped).
        func ask(_ bytes: [UInt8]) async throws -> TalkGroupMessage {
            try await stream.send(bytes)
            while true {
                let answer = try TalkGroupMessage(decoding: try #require(try await stream.nextMessage()).bytes)
                switch answer {
                case .floorTaken, .floorReleased: continue
                default: return answer
                }
            }
        }

        func ask(_ message: TalkGroupMessage) async throws -> TalkGroupMessage { try await ask(message.encoded()) }
    }

    static func refusal(_ message: TalkGroupMessage) -> TalkGroupErrorCode? {
        if case .error(_, let code, _, _) = message { return code }
        return nil
    }

    static func join(_ user: String, group: String = "dispatch", credential: String = "") throws -> TalkGroupMessage {
        .join(.init(group: group, user: try MemberIdentity(user), credential: Array(credential.utf8), wakeAddress: nil))
    }

    @Test func catchUpsThatCannotBeServedAreRefusedByName() async throws {
        let bed = try await TalkGroupBed(configure: { $0.burstBuffer.retainAfterEnd = .milliseconds(200) })
        try await withTimeout(.seconds(60)) {
            let raw = try await Raw(bed)
            // Not joined anywhere yet, then joined to another group.
            #expect(Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: 0, from: 0))) == .notAMember)
            _ = try await raw.ask(try Self.join("carol", group: "other"))
            #expect(Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: 0, from: 0))) == .notAMember)
            _ = try await raw.ask(try Self.join("carol"))
            #expect(
                Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: 0, from: 0))) == .burstUnavailable)

            let talker = try bed.phone("alice")
            #expect(await talker.joined())
            let burst = try await TalkGroupRelayTests.grant(talker)
            try await TalkGroupRelayTests.talk(talker, 5)
            #expect(await eventually { bed.relay.channel(of: "dispatch")?.heldBurst?.next == 5 })
            let next = try #require(bed.relay.channel(of: "dispatch")?.heldBurst?.next)
            #expect(
                Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: burst, from: next + 1)))
                    == .sequenceInFuture)
            #expect(
                Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: burst ^ 1, from: 0)))
                    == .burstUnavailable, "a burst that never ran here")
            try await talker.phone.releaseFloor()
            // Ended, then aged out of the buffer: refused, and its memory freed.
            #expect(await eventually { bed.relay.channel(of: "dispatch")?.heldBurst == nil })
            #expect(
                Self.refusal(try await raw.ask(.catchUp(group: "dispatch", burst: burst, from: 0))) == .burstUnavailable
            )
            #expect(await eventually { bed.relay.channel(of: "dispatch")?.burstBufferUsage.bytes == 0 })
            #expect(bed.relay.channel(of: "dispatch")?.catchUpStatistics.started == 0, "nothing was replayed")
            await raw.connection.close()
        }
        await bed.shutdown()
    }

    @Test func aForgedIdentityIsRefusedAndHoldsNothing() async throws {
        let bed = try await TalkGroupBed(authenticator: { request in
            request.credential == Array("secret-\(request.user)".utf8)
        })
        try await withTimeout(.seconds(30)) {
            let raw = try await Raw(bed)
            #expect(
                Self.refusal(try await raw.ask(try Self.join("mallory", credential: "secret-alice")))
                    == .unauthenticated)
            #expect(bed.relay.member(try MemberIdentity("mallory")) == nil)
            #expect(bed.relay.channel(of: "dispatch") == nil || bed.relay.members(of: "dispatch").isEmpty)
            // Not a member: no floor, no catch-up.
            #expect(
                Self.refusal(try await raw.ask(.requestFloor(group: "dispatch", priority: 0, emergency: false)))
                    == .notAMember)
            // The right credential is admitted on the same stream.
            guard case .joined = try await raw.ask(try Self.join("mallory", credential: "secret-mallory")) else {
                Issue.record("the right credential was refused")
                return
            }
            await raw.connection.close()
        }
        await bed.shutdown()
    }

    @Test func anOversizedWakeAddressIsRefusedAndHoldsNothing() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(30)) {
            let raw = try await Raw(bed)
            var join = try Self.join("bob").encoded()
            let token = [UInt8](repeating: 0x61, count: WakeAddress.maximumTokenSize + 1)
            join += [0x04, 0x01, 0x01, 0x05, 0x42, 0x01] + token
            #expect(Self.refusal(try await raw.ask(join)) == .wakeAddressTooLarge)
            #expect(bed.relay.member(try MemberIdentity("bob")) == nil)
            await raw.connection.close()
        }
        await bed.shutdown()
    }

    @Test func garbageControlMessagesAreAnsweredAndTheRelayGoesOn() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            let raw = try await Raw(bed)
            var generator = SystemRandomNumberGenerator()
            for round in 0..<200 {
                let length = Int.random(in: 1...64, using: &generator)
                var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if round % 2 == 0 { bytes[0] = UInt8.random(in: 1...5, using: &generator) }  // a request's type
                let answer = try await raw.ask(bytes)
                guard case .error(_, let code, _, _) = answer else {
                    if case .joined = answer { continue }  // random bytes that happen to be a join
                    Issue.record("garbage \(bytes) was answered with \(answer)")
                    continue
                }
                #expect(
                    [.malformed, .unknownMessage, .notAMember, .wakeAddressTooLarge, .burstUnavailable].contains(code))
            }
            // A relay's own message sent to the relay, and a valid join after it all.
            #expect(Self.refusal(try await raw.ask(.floorGranted(group: "dispatch", burst: 1))) == .unknownMessage)
            guard case .joined = try await raw.ask(try Self.join("dave")) else {
                Issue.record("the relay stopped answering")
                return
            }
            await raw.connection.close()
        }
        await bed.shutdown()
    }

    @Test func garbageAudioFromTheTalkerIsDroppedAndCounted() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            let listener = try bed.phone("bob")
            #expect(await listener.joined())
            let talker = try bed.phone("alice")
            #expect(await talker.joined())
            let burst = try await TalkGroupRelayTests.grant(talker)
            let stale = AudioFrameHeader(burst: burst ^ 0xFF, sequence: 0, captureMilliseconds: 0).frame([1])
            var wrongKind = AudioFrameHeader(burst: burst, sequence: 0, captureMilliseconds: 0).frame([1])
            wrongKind[0] = 0x00
            let garbage: [[UInt8]] = [
                [1], [0xA1], Array(repeating: 0xA1, count: 18), stale, wrongKind,
                [0xA1] + Array(repeating: 0, count: 30),
            ]
            for bytes in garbage { try talker.phone.link.sendDatagram(bytes) }
            try await TalkGroupRelayTests.talk(talker, 10)
            #expect(await eventually { listener.sequences(of: burst).count == 10 })
            #expect(listener.frames.withLock { $0.count } == 10, "only the burst's audio frames were forwarded")
            #expect(
                await eventually {
                    (bed.relay.channel(of: "dispatch")?.burstBufferUsage.dropped ?? 0) == UInt64(garbage.count)
                })
        }
        await bed.shutdown()
    }

    @Test func aHookThatHangsOrFallsBehindNeverHoldsTheFloorOrTheAudio() async throws {
        let bed = try await TalkGroupBed(
            hook: RecordingWakeSender(hang: true),
            configure: {
                $0.wakeHook = WakeHookPolicy(timeout: .milliseconds(100), queueLimit: 1, concurrency: 1)
                $0.floor = FloorControl(policy: .refuse, idleRelease: .seconds(10))
            })
        try await withTimeout(.seconds(60)) {
            let sleeper = try bed.phone("bob", token: "bob-token")
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            let listener = try bed.phone("carol")
            #expect(await listener.joined())
            let talker = try bed.phone("alice")
            #expect(await talker.joined())
            var bursts: [UInt64] = []
            for _ in 0..<4 {  // four bursts: the first call hangs, one waits, the others are dropped
                let burst = try await TalkGroupRelayTests.grant(talker)
                bursts.append(burst)
                try await TalkGroupRelayTests.talk(talker, 5)
                try await talker.phone.releaseFloor()
                #expect(
                    await eventually { listener.sequences(of: burst).count == 5 }, "audio flows while the hook hangs")
                #expect(
                    await talker.waitForEvent {
                        $0.contains(.released(burst: burst, talker: try! MemberIdentity("alice"), reason: .released))
                    })
            }
            #expect(await eventually { bed.relay.wakeStatistics.timeouts == 1 })
            let statistics = bed.relay.wakeStatistics
            #expect(statistics.requests == 1, "the hung call keeps its place: \(statistics)")
            #expect(statistics.dropped >= 2, "\(statistics)")
        }
        await bed.shutdown()
    }
}
