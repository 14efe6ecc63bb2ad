import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import TestSupport
import Testing

/// An in-place upgrade (SIGUSR2) of a `serve --workers 2 --talk-groups --fleet` host beside another relay of the
/// fleet: the new generation's workers register as new relays (`host#2.PID`, `host#3.PID`, trunks at PORT+2 and
/// PORT+3), the old ones' groups re-home as they drain and leave the store, and the group talks on: listeners on the
/// other relay hear a whole burst from the host before the upgrade and one after, and the floor is never granted
/// twice at once.
@Suite("An in-place upgrade of fleet workers", .serialized, .integration)
struct FleetWorkersUpgradeCLITests {
    typealias Relays = GroupAcrossRelaysCLITests

    /// The live relays of the fleet's store now.
    static func live(_ redis: RedisTestServer) -> [String] {
        guard case .array(let names?) = try? redis.command(["ZRANGE", "ptt-fleet:relays", "0", "-1"]) else {
            return []
        }
        return names.compactMap {
            if case .bulk(let bytes?) = $0 { String(decoding: bytes, as: UTF8.self) } else { nil }
        }
    }

    @Test func aGroupHomedOnAnOldWorkerTalksAfterTheUpgradeAndIsNeverGrantedTwice() async throws {
        let redis = try await RedisTestServer.start()
        let directory = try ConnectRelayDiesTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (other, host, _, _, workers) = try await FleetWorkersCLITests.hostBesideARelay(redis, in: directory)
        defer {
            other.stopNow()
            host.stopNow()
        }
        // Talk only once the workers trunk to each other (the other relay's trunks to them were awaited above): a
        // request forwarded to a home not yet reached is denied (#6), and ten quick denials say nothing here.
        #expect(await FleetWorkersCLITests.trunksUp(host, to: workers) == [])
        let names = [other.address] + workers
        // A group homed on the first generation's worker 0: it must re-home when that worker drains away.
        let group = try #require(
            (0..<1000).lazy.map { "upgrade-\($0)" }.first { RendezvousOrder.home($0, over: names) == workers[0] })
        // A listener on the other relay for each side of the upgrade (a CLI phone runs at most 60 s here).
        let early = Task { try await Relays.phone(other, user: "early", group: group, ["--listen", "30"]) }
        #expect(try await FleetWorkersCLITests.recorded("early", in: redis) == other.address)
        let before = try await Relays.talkUntilGranted(host, user: "alice", group: group, frames: 20)
        #expect(Relays.floor(before) == ["granted", "released"], "before the upgrade: \(before)")
        Self.expectHeard(try await early.value, talker: "alice")

        // The upgrade: a new generation in slots 2 and 3, registered as new relays; the old one drains and leaves.
        kill(host.processIdentifier, SIGUSR2)
        let upgraded = try await WorkerUpgradeTests.waitForWorkers(of: host) { workers in
            Set(workers.values) == [2, 3] && workers.count == 2
        }
        let newWorkers = upgraded.sorted { $0.value < $1.value }.map { "host#\($0.value).\($0.key)" }
        let left = await eventually(within: .seconds(40)) {
            let live = Set(Self.live(redis))
            return workers.allSatisfy { !live.contains($0) } && newWorkers.allSatisfy { live.contains($0) }
        }
        #expect(left, "old workers gone from the store and new ones in it: \(Self.live(redis))")
        #expect(await FleetWorkersCLITests.trunksUp(other, to: newWorkers) == [])

        // The group talks again from the host (a new connection: a new worker), granted by its new home.
        let late = Task { try await Relays.phone(other, user: "late", group: group, ["--listen", "30"]) }
        #expect(try await FleetWorkersCLITests.recorded("late", in: redis) == other.address)
        let after = try await Relays.talkUntilGranted(host, user: "bob", group: group, frames: 20)
        #expect(Relays.floor(after) == ["granted", "released"], "after the upgrade: \(after)")
        let atOther = await Relays.floorLines(of: other, group: group, quietFor: .seconds(1))
        Relays.expectOneFloorAtATime(atOther)

        Self.expectHeard(try await late.value, talker: "bob")
    }

    /// Expects a listening phone's output to hold one whole burst (20 frames, none missing) of `talker`.
    static func expectHeard(_ output: String, talker: String) {
        let bursts = Relays.bursts(output).filter { $0["talker"] as? String == talker }
        #expect(bursts.count == 1, "the listener heard \(talker): \(output)")
        #expect(
            bursts.first?["frames"] as? Int == 20 && bursts.first?["missing"] as? Int == 0,
            "the listener heard \(talker): \(bursts)")
    }
}
