import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore

@testable import PTTTalkGroups

/// One wake per burst across a fleet, in this process over real loopback sockets with a real redis-server: the
/// group's home hands its hook every member of the group not connected on any relay, once, with the wake address
/// from the store; the other relays run no hook for the burst; a member that moved relays is named once, with the
/// address it registered last; a store whose answer is unusable leaves the home waking its own members, counted.
@Suite("A fleet-wide wake, once per burst", .serialized, .integration)
struct FleetWideWakeTests {
    /// The entry of `user` in the bed's store (nil: none yet).
    static func entry(_ user: String, in bed: TrunkBed) -> String? {
        guard case .array(let keys?) = try? bed.redis.command(["KEYS", "*member:\(user)"]),
            case .bulk(let key?)? = keys.first,
            case .bulk(let value?) = try? bed.redis.command(["GET", String(decoding: key, as: UTF8.self)])
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// Waits until the store records `user` on `relay` with `presence` (and `token`, when given).
    static func recorded(
        _ user: String, on relay: String, _ presence: MemberPresence, token: String? = nil, in bed: TrunkBed
    ) async -> Bool {
        await eventually(within: .seconds(20)) {
            guard let entry = entry(user, in: bed) else { return false }
            return entry.hasPrefix("relay=\(relay) ") && entry.contains(" presence=\(presence)")
                && (token.map { entry.hasSuffix(" wake=apns:\($0)") } ?? true)
        }
    }

    /// The bed's key prefix, from the entry of `user` (recorded already).
    static func prefix(from user: String, in bed: TrunkBed) throws -> String {
        guard case .array(let keys?) = try bed.redis.command(["KEYS", "*member:\(user)"]),
            case .bulk(let key?)? = keys.first
        else { throw TransportError(.internalError, "no entry of \(user)") }
        return String(String(decoding: key, as: UTF8.self).dropLast("member:\(user)".count))
    }

    /// The `.wake` events relay `index` reported.
    static func wakeEvents(_ bed: TrunkBed, _ index: Int) -> Int {
        bed.events[index].withLock { events in
            events.filter { if case .wake = $0 { true } else { false } }.count
        }
    }

    @Test func theHomeWakesEverySuspendedMemberOfTheFleetOnceAndNoOtherRelayRunsItsHook() async throws {
        let names = ["relay-a", "relay-b", "relay-c"]
        let bed = try await TrunkBed(names) { configuration in
            configuration.fleet?.memberReadDeadline = .seconds(5)  // a loaded machine: the store is slow, not gone
            configuration.fleet?.memberLifetime = .seconds(3)  // renewed every second: a moved member is noticed
        }
        try await withTimeout(.seconds(150)) {
            #expect(await bed.meshed(), "\(bed.trunkEvents(0))")
            let home = try #require(await bed.home(of: "g"))
            let (talkerAt, sleeperAt) = ((home + 1) % 3, (home + 2) % 3)

            // Suspended through relay B (not the home, not the talker's).
            let sleeper = try bed.relays[sleeperAt].phone("sleeper", group: "g", token: "sleeper-token")
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            #expect(await Self.recorded("sleeper", on: names[sleeperAt], .suspended, in: bed))
            // Connected on the home: not woken.
            let awake = try bed.relays[home].phone("awake", group: "g", token: "awake-token")
            #expect(await awake.joined())
            #expect(await Self.recorded("awake", on: names[home], .connected, in: bed))
            // Connected on relay B: not woken either.
            let roamer = try bed.relays[sleeperAt].phone("roamer", group: "g", token: "roamer-token")
            #expect(await roamer.joined())
            #expect(await Self.recorded("roamer", on: names[sleeperAt], .connected, in: bed))
            // Suspended on the home, then joined relay B with a fresh token and suspended there: it moved.
            let before = try bed.relays[home].phone("mover", group: "g", token: "mover-old")
            #expect(await before.joined())
            await before.phone.suspend()
            #expect(await Self.recorded("mover", on: names[home], .suspended, in: bed))
            let after = try bed.relays[sleeperAt].phone("mover", group: "g", token: "mover-new")
            #expect(await after.joined())
            await after.phone.suspend()
            #expect(await Self.recorded("mover", on: names[sleeperAt], .suspended, token: "mover-new", in: bed))
            // The home's next renewal of its old record is refused (relay B owns the entry): it forgets the mover.
            let mover = try MemberIdentity("mover")
            #expect(
                await eventually(within: .seconds(20)) { bed.relays[home].relay.member(mover) == nil },
                "\(String(describing: bed.relays[home].relay.member(mover)))")
            #expect(await Self.recorded("mover", on: names[sleeperAt], .suspended, token: "mover-new", in: bed))
            #expect((bed.relays[home].relay.fleetStatistics?.membersMoved ?? 0) >= 1)

            let talker = try bed.relays[talkerAt].phone("talker", group: "g", token: "talker-token")
            #expect(await talker.joined())
            #expect(
                await eventually {
                    bed.relays.allSatisfy { relay in
                        relay.relay.trunks.withLock { $0 }?.peers.values.allSatisfy { $0.follows("g") } == true
                    }
                })
            let burst = try await TalkGroupRelayTests.grant(talker)
            let hook = bed.relays[home].hook
            #expect(await eventually(within: .seconds(20)) { !hook.requests.withLock { $0.isEmpty } })
            let request = try #require(hook.requests.withLock { $0.first })
            #expect(request.burst == burst && request.talker.user == "talker" && request.group == "g")
            #expect(request.members.map(\.identity.user) == ["mover", "sleeper"], "\(request.members)")
            #expect(request.members.map(\.address.token) == ["mover-new", "sleeper-token"])
            #expect(request.members.map(\.lastRelay) == [names[sleeperAt], names[sleeperAt]])
            #expect(request.relay == RelayIdentity(serverName: "localhost", port: bed.relays[home].address.port))
            let latency = try #require(bed.relays[home].relay.wakeStatistics.handOffLatencies.first)
            print(
                "measure: floor request (forwarded to the home) → fleet-wide wake handed to the hook \(latency) "
                    + "(one store read, in-process, loopback, debug build)")

            try await TalkGroupRelayTests.talk(talker, 5)
            try await talker.phone.releaseFloor()
            for phone in [talker, awake, roamer] {
                #expect(
                    await phone.waitForEvent(within: .seconds(20)) {
                        $0.contains { if case .released(burst, _, _) = $0 { true } else { false } }
                    })
            }
            // Every relay saw the burst begin and end; only the home handed it to its hook, once.
            #expect(hook.requests.withLock { $0.count } == 1)
            for index in 0..<3 where index != home {
                #expect(bed.relays[index].hook.requests.withLock { $0.isEmpty }, "relay \(names[index]) woke")
                #expect(Self.wakeEvents(bed, index) == 0, "relay \(names[index]) reported a wake")
            }
            #expect(Self.wakeEvents(bed, home) == 1)
            #expect((bed.relays[home].relay.fleetStatistics?.memberReads ?? 0) >= 1)
        }
        await bed.shutdown()
    }

    /// The store answers the home's read with an error (the group's index is another type of key): the home wakes
    /// its own members, and the failure is counted; the relay goes on.
    @Test func anUnusableStoreAnswerWakesTheHomesOwnMembersCounted() async throws {
        let bed = try await TrunkBed(["relay-a"])
        try await withTimeout(.seconds(90)) {
            let sleeper = try bed.relays[0].phone("sleeper", group: "g", token: "sleeper-token")
            #expect(await sleeper.joined())
            await sleeper.phone.suspend()
            #expect(await Self.recorded("sleeper", on: "relay-a", .suspended, in: bed))
            // The group's index replaced by a key of another type: the home's read is answered with an error.
            let prefix = try Self.prefix(from: "sleeper", in: bed)
            _ = try bed.redis.command(["SET", prefix + "group:g", "not a sorted set"])
            let talker = try bed.relays[0].phone("talker", group: "g")
            #expect(await talker.joined())
            #expect(await eventually(within: .seconds(20)) { bed.relays[0].relay.fleetRole(of: "g") == .home })
            _ = try await TalkGroupRelayTests.grant(talker)
            let hook = bed.relays[0].hook
            #expect(await eventually(within: .seconds(20)) { !hook.requests.withLock { $0.isEmpty } })
            #expect(hook.requests.withLock { $0.first?.members.map(\.identity.user) } == ["sleeper"])
            let statistics = try #require(bed.relays[0].relay.fleetStatistics)
            #expect(statistics.memberReadsFailed >= 1, "\(statistics)")
            #expect(statistics.lastError?.code == .fleetStoreUnusable, "\(String(describing: statistics.lastError))")
            try await talker.phone.releaseFloor()
        }
        await bed.shutdown()
    }

    /// 1,000 suspended members recorded by another relay of the fleet: the home hands all of them to its hook, in
    /// one read of the store; the hand-off latency is printed for the record (no timed assertion).
    @Test func aThousandSuspendedMembersOfAnotherRelayAreHandedOverFromOneRead() async throws {
        let bed = try await TrunkBed(["relay-a"]) { configuration in
            configuration.fleet?.memberReadDeadline = .seconds(5)
        }
        try await withTimeout(.seconds(90)) {
            let talker = try bed.relays[0].phone("talker", group: "g")
            #expect(await talker.joined())
            #expect(await Self.recorded("talker", on: "relay-a", .connected, in: bed))
            let prefix = try Self.prefix(from: "talker", in: bed)
            let seeded = try bed.redis.command([
                "EVAL",
                """
                for i = 1, 1000 do
                  local user = string.format('member-%04d', i)
                  redis.call('SET', ARGV[1] .. 'member:' .. user,
                    'relay=relay-x sid= group=g presence=suspended wake=apns:' .. string.rep('0', 60) .. string.format('%04d', i),
                    'PX', 60000)
                  redis.call('ZADD', ARGV[1] .. 'group:g', 99999999999999, user)
                end
                return 1000
                """,
                "0", prefix,
            ])
            #expect(seeded == .integer(1000))
            #expect(await eventually(within: .seconds(20)) { bed.relays[0].relay.fleetRole(of: "g") == .home })
            _ = try await TalkGroupRelayTests.grant(talker)
            let hook = bed.relays[0].hook
            #expect(await eventually(within: .seconds(20)) { !hook.requests.withLock { $0.isEmpty } })
            let members = hook.requests.withLock { $0.first?.members } ?? []
            #expect(members.count == 1000)
            #expect(
                members.first?.identity.user == "member-0001" && members.last?.address.token.hasSuffix("1000") == true)
            #expect(members.allSatisfy { $0.lastRelay == "relay-x" })
            let latency = try #require(bed.relays[0].relay.wakeStatistics.handOffLatencies.first)
            // The relay's own share of it: parsing the store's answer and choosing whom to wake, timed here alone.
            let reply = RESPValue.array(
                (1...1000).flatMap { index -> [RESPValue] in
                    let user = "member-" + String(format: "%04d", index)
                    let token = String(repeating: "0", count: 60) + String(format: "%04d", index)
                    return [
                        .bulk(Array(user.utf8)),
                        .bulk(Array("relay=relay-x sid= group=g presence=suspended wake=apns:\(token)".utf8)),
                    ]
                })
            let clock = ContinuousClock()
            let started = clock.now
            let entries = try FleetMembers.entries(reply)
            let parsed = clock.now
            let chosen = FleetWake.targets(
                talker: try MemberIdentity("talker"), me: "relay-a", local: [], connectedHere: [], group: "g",
                store: entries)
            let ended = clock.now
            #expect(chosen.count == 1000)
            print(
                "measure: floor request → 1,000 suspended members of another relay handed to the hook \(latency) "
                    + "(one store read, in-process, loopback, debug build); of which parsing the answer takes "
                    + "\(parsed - started), choosing whom to wake \(ended - parsed)")
            try await talker.phone.releaseFloor()
        }
        await bed.shutdown()
    }
}
