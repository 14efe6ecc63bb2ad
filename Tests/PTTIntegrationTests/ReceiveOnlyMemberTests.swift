import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// A member that joined receive-only (MCPTT reject cause #5), on real sockets over QUIC and TCP: its floor requests
/// are denied with cause 5 — naming no holder on an idle floor, the talker on a taken one — its audio datagrams are
/// dropped and counted, and it hears the talker. A phone of the protocol's first revision still reads the denial
/// (the relay names it as the holder, the field it requires).
@Suite("Talk-group relay: receive-only members", .serialized, .integration)
struct ReceiveOnlyMemberTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aReceiveOnlyMemberIsDeniedCause5AndItsAudioIsDropped(path: FallbackPolicy) async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(90)) {
            let listener = try bed.phone("radio", path: path, role: .receiveOnly)
            let talker = try bed.phone("alice", path: path)
            #expect(await listener.joined())
            #expect(await talker.joined())
            #expect(bed.relay.member(try MemberIdentity("radio")) != nil)

            // An idle floor: denied, and nobody is named as its holder.
            #expect(try await listener.phone.requestFloor() == .denied(holder: nil, cause: .receiveOnly))

            // A taken floor: denied, the talker named.
            let burst = try await TalkGroupRelayTests.grant(talker)
            #expect(
                try await listener.phone.requestFloor()
                    == .denied(holder: try MemberIdentity("alice"), cause: .receiveOnly))
            #expect(throws: TransportError.self, "sendAudio needs a grant") { try listener.phone.sendAudio([1]) }

            // It sends audio anyway, stamped with the talker's burst: every frame is dropped at the relay and
            // counted; the talker hears none of them.
            let channel = try #require(bed.relay.channel(of: "dispatch"))
            let refusedBefore = channel.framesRefused
            for sequence in UInt32(1_000)..<1_020 {
                let frame = AudioFrameHeader(burst: burst, sequence: sequence, captureMilliseconds: 0).frame([9, 9])
                try listener.phone.link.sendDatagram(frame, expiresAfter: .seconds(5))
            }
            #expect(
                await eventually(within: .seconds(30)) { channel.framesRefused >= refusedBefore + 20 },
                "refused \(channel.framesRefused - refusedBefore) of 20")
            // The talker's own frames still reach the receive-only member.
            try await TalkGroupRelayTests.talk(talker, 5)
            #expect(await eventually(within: .seconds(30)) { listener.sequences(of: burst).count >= 5 })
            #expect(talker.sequences(of: burst).allSatisfy { $0 < 1_000 }, "a forged frame was forwarded")
            #expect(listener.events.withLock { $0 }.contains(.denied(holder: nil, cause: .receiveOnly)))
            try await talker.phone.releaseFloor()
        }
        await bed.shutdown()
    }

    @Test func aFirstRevisionPhoneIsNamedAsTheHolderItRequires() async throws {
        let bed = try await TalkGroupBed()
        try await withTimeout(.seconds(60)) {
            // A join without the revision field (revision 1), receive-only: its denial names itself.
            var old = TalkGroupMessage.JoinRequest(
                group: "dispatch", user: try MemberIdentity("old"), credential: [], wakeAddress: nil,
                role: .receiveOnly)
            old.revision = 1
            let first = try await TalkGroupBadInputTests.Raw(bed)
            _ = try await first.ask(.join(old))
            let answer = try await first.ask(.requestFloor(group: "dispatch", priority: 0, emergency: false))
            #expect(answer == .floorDenied(group: "dispatch", holder: try MemberIdentity("old"), cause: .receiveOnly))
            // The same request of a revision-2 phone: no holder on the wire.
            let current = try await TalkGroupBadInputTests.Raw(bed)
            _ = try await current.ask(
                .join(
                    .init(
                        group: "dispatch", user: try MemberIdentity("new"), credential: [], wakeAddress: nil,
                        role: .receiveOnly)))
            let answerNow = try await current.ask(.requestFloor(group: "dispatch", priority: 0, emergency: false))
            #expect(answerNow == .floorDenied(group: "dispatch", holder: nil, cause: .receiveOnly))
            // A join with a role this revision does not know: refused as malformed, the stream stays up.
            let unknownRole: [UInt8] =
                [0x01, 0x01, 0x08] + Array("dispatch".utf8) + [0x02, 0x01, 0x78, 0x18, 0x01, 0x07]
            #expect(TalkGroupBadInputTests.refusal(try await current.ask(unknownRole)) == .malformed)
            await first.connection.close()
            await current.connection.close()
        }
        await bed.shutdown()
    }
}
