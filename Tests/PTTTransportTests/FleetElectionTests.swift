import Testing
import TransportCore

@testable import PTTTalkGroups

/// A home relay per group on a virtual clock: rendezvous order, leases, arrivals, a dead home replaced, a store
/// that stops answering, and a fleet simulated for 20 s with random delays, partitions and deaths in which no
/// two relays are ever home of one group at once (sans-IO).
@Suite("Fleet election (sans-IO)")
struct FleetElectionTests {
    static let ms: UInt64 = 1_000_000
    static let lifetime = 600 * ms

    @Test func rendezvousOrderIsStableAndMovesOnlyTheGroupsOfARelayThatLeaves() {
        let relays = ["r1", "r2", "r3", "r4"]
        let groups = (0..<400).map { "group-\($0)" }
        let homes = groups.map { RendezvousOrder.home($0, over: relays)! }
        #expect(homes == groups.map { RendezvousOrder.rank($0, over: relays.reversed()).first! })
        let counts = Dictionary(grouping: homes, by: { $0 }).mapValues(\.count)
        #expect(counts.values.allSatisfy { $0 > 50 }, "each of 4 relays is home of some 100 of 400 groups: \(counts)")
        let without = groups.map { RendezvousOrder.home($0, over: ["r1", "r2", "r4"])! }
        for (index, group) in groups.enumerated() where homes[index] != "r3" {
            #expect(without[index] == homes[index], "\(group) moved though its home stayed")
        }
        for (index, _) in groups.enumerated() where homes[index] == "r3" {
            #expect(without[index] == RendezvousOrder.rank(groups[index], over: relays)[1], "the next in order")
        }
        #expect(RendezvousOrder.home("g", over: [String]()) == nil)
    }

    @Test func aNewcomerWaitsALifetimeThenGrants() {
        let group = groupHomed(at: "a", over: ["a", "b"])
        var a = FleetElection(me: "a", lifetime: Self.lifetime)
        #expect(a.follow(group, now: 0) == .unknown)
        let changes = a.viewArrived(["a", "b"], sentAt: 0, registered: true, now: 2 * Self.ms)
        #expect(changes == [FleetElection.Change(group: group, from: .unknown, to: .arriving)])
        #expect(!a.mayGrant(group, now: 100 * Self.ms))
        #expect(a.nextDeadline(now: 100 * Self.ms) == 600 * Self.ms)
        _ = a.viewArrived(["a", "b"], sentAt: 150 * Self.ms, registered: false, now: 151 * Self.ms)
        _ = a.viewArrived(["a", "b"], sentAt: 300 * Self.ms, registered: false, now: 301 * Self.ms)
        _ = a.viewArrived(["a", "b"], sentAt: 450 * Self.ms, registered: false, now: 451 * Self.ms)
        let grown = a.tick(now: 602 * Self.ms)
        #expect(grown == [FleetElection.Change(group: group, from: .arriving, to: .home)])
        #expect(grown.allSatisfy { !$0.releasesFloor }, "an arrival granted nothing to release")
        #expect(a.mayGrant(group, now: 602 * Self.ms))
    }

    @Test func aHomeWhoseStoreStopsAnsweringStopsGrantingAtItsLeaseEnd() {
        let group = groupHomed(at: "a", over: ["a", "b"])
        var a = FleetElection(me: "a", lifetime: Self.lifetime)
        a.follow(group, now: 0)
        var t: UInt64 = 0
        while t <= 900 * Self.ms {
            _ = a.viewArrived(["a", "b"], sentAt: t, registered: t == 0, now: t + Self.ms)
            t += 150 * Self.ms
        }
        #expect(a.mayGrant(group, now: t))
        // The store answers nothing from here on: the last answered heartbeat was sent at 900 ms.
        #expect(a.heartbeatFailed(now: 1_400 * Self.ms).isEmpty)
        let lapsed = a.heartbeatFailed(now: 1_500 * Self.ms)
        #expect(lapsed == [FleetElection.Change(group: group, from: .home, to: .unconfirmed)])
        #expect(lapsed[0].releasesFloor)
        // The store is back: a heartbeat after the lapse is a new registration, so it waits a lifetime again.
        _ = a.viewArrived(["a", "b"], sentAt: 2_000 * Self.ms, registered: true, now: 2_001 * Self.ms)
        #expect(a.role(of: group, now: 2_001 * Self.ms) == .arriving)
        _ = a.viewArrived(["a", "b"], sentAt: 2_500 * Self.ms, registered: false, now: 2_501 * Self.ms)
        #expect(a.role(of: group, now: 2_602 * Self.ms) == .home)
    }

    @Test func theNextInOrderTakesOverAtOnceWhenTheHomeDropsOut() {
        let group = groupHomed(at: "a", over: ["a", "b", "c"])
        let next = RendezvousOrder.rank(group, over: ["a", "b", "c"])[1]
        var b = FleetElection(me: next, lifetime: Self.lifetime)
        b.follow(group, now: 0)
        for beat in 0...4 {
            let sent = UInt64(beat) * 175 * Self.ms
            _ = b.viewArrived(["a", "b", "c"], sentAt: sent, registered: beat == 0, now: sent + Self.ms)
        }
        #expect(b.role(of: group, now: 701 * Self.ms) == .remote("a"))
        let moved = b.viewArrived(["b", "c"], sentAt: 850 * Self.ms, registered: false, now: 851 * Self.ms)
        #expect(b.registeredSince == Self.ms, "registered without a gap since the first heartbeat")
        #expect(moved == [FleetElection.Change(group: group, from: .remote("a"), to: .home)])
        #expect(moved[0].releasesFloor, "the dead home's grant is void: talkers ask again")
        #expect(b.mayGrant(group, now: 851 * Self.ms))
        #expect(b.viewArrived(["b", "c"], sentAt: 800 * Self.ms, registered: false, now: 900 * Self.ms).isEmpty)
        #expect(b.live == ["b", "c"], "an answer older than the view held is ignored")
    }

    /// Three to five relays, one simulated store with expiring entries, random one-way delays (0–120 ms),
    /// partitions from the store (0.3–3 s), relays killed and restarted; checked every millisecond: at most one
    /// relay grants each group's floor, and a group whose home died has a granting home again within 1 s.
    @Test(arguments: [1, 2, 3, 4])
    func aSimulatedFleetNeverHasTwoHomesForAGroup(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let names = ["r1", "r2", "r3", "r4", "r5"].prefix(3 + Int(seed % 3))
        let groups = (0..<8).map { "g\($0)" }
        var store: [String: UInt64] = [:]  // relay → expiry (store's clock = the virtual clock)
        struct Relay {
            var election: FleetElection
            var alive = true
            var cutUntil: UInt64 = 0
            var nextBeat: UInt64 = 0
            var revivesAt: UInt64 = 0
        }
        var relays = Dictionary(
            uniqueKeysWithValues: names.map { ($0, Relay(election: FleetElection(me: $0, lifetime: Self.lifetime))) })
        for name in names { for group in groups { relays[name]!.election.follow(group, now: 0) } }
        // In-flight: (arrives at store, relay, sentAt) and (arrives at relay, relay, sentAt, view, registered).
        var requests: [(at: UInt64, relay: String, sentAt: UInt64)] = []
        var answers: [(at: UInt64, relay: String, sentAt: UInt64, view: [String], registered: Bool)] = []
        var lostHomeAt: [String: UInt64] = [:]
        var worstRehome: UInt64 = 0
        let end: UInt64 = 20_000 * Self.ms
        var now: UInt64 = 0
        while now < end {
            // Relays: deaths, revivals, partitions, heartbeats every 150 ms.
            for name in names {
                var relay = relays[name]!
                if relay.alive, random.next() % 8_000 == 0 {
                    relay.alive = false
                    relay.revivesAt = now + (1_000 + random.next() % 4_000) * Self.ms
                    for group in groups where relay.election.mayGrant(group, now: now) { lostHomeAt[group] = now }
                } else if !relay.alive, now >= relay.revivesAt {
                    relay = Relay(election: FleetElection(me: name, lifetime: Self.lifetime), nextBeat: now)
                    for group in groups { relay.election.follow(group, now: now) }
                }
                if relay.alive, random.next() % 10_000 == 0 {
                    relay.cutUntil = now + (300 + random.next() % 2_700) * Self.ms
                }
                if relay.alive, now >= relay.nextBeat {
                    relay.nextBeat = now + 150 * Self.ms
                    if now >= relay.cutUntil {
                        requests.append((now + random.next() % 120 * Self.ms, name, now))
                    }
                }
                if relay.alive { _ = relay.election.tick(now: now) }
                relays[name] = relay
            }
            // The store.
            for request in requests where request.at <= now {
                store = store.filter { $0.value > now }
                let registered = store[request.relay] == nil
                store[request.relay] = now + Self.lifetime
                answers.append(
                    (
                        now + random.next() % 120 * Self.ms, request.relay, request.sentAt, store.keys.sorted(),
                        registered
                    ))
            }
            requests.removeAll { $0.at <= now }
            store = store.filter { $0.value > now }
            for answer in answers where answer.at <= now {
                guard relays[answer.relay]!.alive, now >= relays[answer.relay]!.cutUntil else { continue }
                _ = relays[answer.relay]!.election.viewArrived(
                    answer.view, sentAt: answer.sentAt, registered: answer.registered, now: now)
            }
            answers.removeAll { $0.at <= now }
            // A dead relay's key stays until it expires; requests of a relay killed in flight still register it,
            // which the store's expiry then undoes (as Redis would).
            for group in groups {
                let granting = names.filter { relays[$0]!.alive && relays[$0]!.election.mayGrant(group, now: now) }
                #expect(granting.count <= 1, "seed \(seed) at \(now / Self.ms) ms: \(group) has homes \(granting)")
                if granting.count > 1 { return }
                if !granting.isEmpty, let lost = lostHomeAt.removeValue(forKey: group) {
                    worstRehome = max(worstRehome, now - lost)
                }
            }
            now += Self.ms
        }
        // A killed home is replaced within lifetime + heartbeat + the two delays, unless partitions overlapped.
        #expect(worstRehome < 5_000 * Self.ms, "seed \(seed): re-home took \(worstRehome / Self.ms) ms")
    }

    /// With no partitions and no delays beyond 5 ms, a killed home is replaced within 1 s.
    @Test func aKilledHomeIsReplacedWithinOneSecond() {
        let names = ["r1", "r2", "r3"]
        let group = groupHomed(at: "r1", over: names)
        var elections = Dictionary(
            uniqueKeysWithValues: names.map { ($0, FleetElection(me: $0, lifetime: Self.lifetime)) })
        for name in names { elections[name]!.follow(group, now: 0) }
        var store: [String: UInt64] = [:]
        var killedAt: UInt64?
        var now: UInt64 = 0
        while now < 10_000 * Self.ms {
            if now == 3_000 * Self.ms {
                #expect(elections["r1"]!.mayGrant(group, now: now))
                killedAt = now
            }
            for (index, name) in names.enumerated() where !(name == "r1" && killedAt != nil) {
                guard (now / Self.ms + UInt64(index) * 50) % 150 == 0 else { continue }
                store = store.filter { $0.value > now + 2 * Self.ms }
                let registered = store[name] == nil
                store[name] = now + 2 * Self.ms + Self.lifetime
                _ = elections[name]!.viewArrived(
                    store.keys.sorted(), sentAt: now, registered: registered, now: now + 5 * Self.ms)
            }
            if let killedAt, names.dropFirst().contains(where: { elections[$0]!.mayGrant(group, now: now) }) {
                #expect(now - killedAt < 1_000 * Self.ms, "re-homed after \((now - killedAt) / Self.ms) ms")
                return
            }
            now += Self.ms
        }
        Issue.record("nobody took over")
    }

    private func groupHomed(at relay: String, over relays: [String]) -> String {
        (0...).lazy.map { "group-\($0)" }.first { RendezvousOrder.home($0, over: relays) == relay }!
    }
}
