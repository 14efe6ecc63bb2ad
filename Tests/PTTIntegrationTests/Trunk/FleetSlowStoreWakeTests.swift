import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// A store too slow for a burst's read, or gone, still wakes the members on other relays, in this process over real
/// loopback sockets with a real redis-server behind a `RedisPathProxy`: an answer after the 200 ms deadline wakes a
/// member of another relay once, in a late addition; with the store down the home wakes it at once from the group's
/// last list.
@Suite("A slow or absent store still wakes the fleet", .serialized, .integration)
struct FleetSlowStoreWakeTests {
    /// The requests `hook` was handed for `burst`, once it was handed one (empty: none within 20 s).
    static func requests(of burst: UInt64, _ hook: RecordingWakeSender) async -> [WakeRequest] {
        _ = await eventually(within: .seconds(20)) { hook.requests.withLock { $0.contains { $0.burst == burst } } }
        return hook.requests.withLock { $0.filter { $0.burst == burst } }
    }

    /// Expects `requests` to be one request naming the sleeper of `relay` (a late addition or not).
    static func expectSleeperWokenOnce(_ requests: [WakeRequest], from relay: String, late: Bool) {
        #expect(requests.count == 1, "\(requests)")
        #expect(requests.first?.isLateAddition == late)
        #expect(requests.first?.members.map(\.identity.user) == ["sleeper"])
        #expect(requests.first?.members.first?.lastRelay == relay)
        #expect(requests.first?.members.first?.address.token == "sleeper-token")
    }

    @Test func aLateAnswerWakesAMemberOfAnotherRelayOnceAndADownStoreWakesItFromTheLastList() async throws {
        let names = ["relay-a", "relay-b"]
        let bed = try await TrunkBed(names, proxied: true) { configuration in
            // Heartbeats answered through a 700 ms path (their deadline is twice the heartbeat), and a lease long
            // enough that the home still grants for seconds after the store is gone; the read's deadline stays
            // the default 200 ms, and a late answer counts for as long as a loaded machine may take.
            configuration.fleet?.heartbeat = .milliseconds(1_500)
            configuration.fleet?.lifetime = .seconds(10)
            configuration.fleet?.lateMemberReadDeadline = .seconds(30)
        }
        let proxy = try #require(bed.proxy)
        try await withTimeout(.seconds(180)) {
            #expect(await bed.meshed(within: .seconds(60)), "\(bed.trunkEvents(0))")
            let home = try #require(await bed.home(of: "g", within: .seconds(60)))
            let other = 1 - home
            let sleeper = try bed.relays[other].phone("sleeper", group: "g", token: "sleeper-token")
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            #expect(await FleetWideWakeTests.recorded("sleeper", on: names[other], .suspended, in: bed))
            let talker = try bed.relays[home].phone("talker", group: "g")
            #expect(await talker.joined())
            let hook = bed.relays[home].hook
            let statistics: @Sendable () -> FleetStatistics = {
                bed.relays[home].relay.fleetStatistics ?? FleetStatistics()
            }

            // Slow: every byte to and from the store waits 700 ms, so the home's read is answered ≥ 1.4 s after the
            // burst starts, well past its 200 ms deadline (a loop late by a second still sees the deadline first),
            // with no list of the group yet to wake from in the meantime.
            proxy.setDelay(.milliseconds(700))
            let slowBurst = try await TalkGroupRelayTests.grant(talker)
            #expect(await eventually(within: .seconds(60)) { statistics().memberReadsLate >= 1 }, "\(statistics())")
            Self.expectSleeperWokenOnce(await Self.requests(of: slowBurst, hook), from: names[other], late: true)
            let afterSlow = statistics()
            #expect(afterSlow.memberReadsFailed >= 1 && afterSlow.memberReadsCached == 0, "\(afterSlow)")
            try await talker.phone.releaseFloor()
            #expect(
                await talker.waitForEvent(within: .seconds(20)) {
                    $0.contains { if case .released(slowBurst, _, _) = $0 { true } else { false } }
                })

            // Down: the path to the store is cut; the home still holds its lease for seconds and grants, and wakes
            // the sleeper at once from the list the late answer left.
            proxy.setDelay(.zero)
            proxy.stop()
            let downBurst = try await TalkGroupRelayTests.grant(talker)
            Self.expectSleeperWokenOnce(await Self.requests(of: downBurst, hook), from: names[other], late: false)
            #expect(statistics().memberReadsCached >= 1, "\(statistics())")
            try await talker.phone.releaseFloor()
        }
        await bed.shutdown()
    }
}
