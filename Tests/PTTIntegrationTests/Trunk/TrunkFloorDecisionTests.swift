import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// The group's home decides every floor request of the fleet, over real loopback sockets with a real
/// redis-server: a receive-only member of another relay is denied with cause #5 by the home (its relay forwards its
/// role and does not decide), and a denial that crossed the trunk names the real holder, or none.
@Suite("Trunks: the home's floor decides for members of every relay", .integration)
struct TrunkFloorDecisionTests {
    @Test func aReceiveOnlyMemberOfAnotherRelayIsDeniedByTheHomeNamingTheRealHolder() async throws {
        // Refused, not queued, while the floor is taken (#1), and no idle release while the test looks.
        let bed = try await TrunkBed(
            ["relay-a", "relay-b"], floor: FloorControl(policy: .refuse, idleRelease: .seconds(300)))
        try await withTimeout(.seconds(120)) {
            let radios = try (0..<2).map { try bed.relays[$0].phone("radio-\($0)", group: "g", role: .receiveOnly) }
            for radio in radios { #expect(await radio.joined()) }
            #expect(await bed.meshed(), "\(bed.trunkEvents(0)) \(bed.trunkEvents(1))")
            let home = try #require(await bed.home(of: "g"))
            let other = 1 - home
            #expect(
                await eventually {
                    bed.relays.allSatisfy { relay in
                        relay.relay.trunks.withLock { $0 }?.peers.values.allSatisfy { $0.follows("g") } == true
                    }
                })
            // Each side said its trunk revision when the trunk came up: the home reads roles.
            for relay in bed.relays {
                let revisions = relay.relay.trunks.withLock { $0 }?.peers.values.map(\.revision) ?? []
                #expect(revisions == [TrunkMessage.revision], "\(revisions)")
            }
            let radio = radios[other]
            let decidedBefore = bed.relays[home].relay.trunkStatistics?.floorRequestsDecided ?? 0

            // An idle floor: the home denies #5, naming nobody.
            #expect(try await radio.phone.requestFloor() == .denied(holder: nil, cause: .receiveOnly))
            #expect(bed.relays[other].relay.trunkStatistics?.floorRequestsForwarded == 1, "forwarded, not decided")
            #expect(
                (bed.relays[home].relay.trunkStatistics?.floorRequestsDecided ?? 0) == decidedBefore + 1,
                "the home decided it")

            // A member of the home takes the floor: the denial that crosses the trunk names it.
            let alice = try bed.relays[home].phone("alice", group: "g")
            #expect(await alice.joined())
            _ = try await TalkGroupRelayTests.grant(alice)
            let aliceID = try MemberIdentity("alice")
            #expect(try await radio.phone.requestFloor() == .denied(holder: aliceID, cause: .receiveOnly))
            // A talker of the other relay is refused (#1) naming the holder too, not itself.
            let bob = try bed.relays[other].phone("bob", group: "g")
            #expect(await bob.joined())
            #expect(try await bob.phone.requestFloor() == .denied(holder: aliceID, cause: .anotherMemberHasPermission))
            #expect(bed.relays[other].relay.trunkStatistics?.floorRequestsForwarded == 3)
            try await alice.phone.releaseFloor()
        }
        await bed.shutdown()
    }
}
