import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

/// A host running `serve --workers 2 --talk-groups --fleet` beside a relay of one process: each worker is a relay of
/// the fleet (`host#0`, `host#1`) with a trunk listener of its own at `--trunk-listen` PORT+INDEX, so members the
/// kernel steers to different workers of one host and members of the other relay hear every frame of a burst, the
/// group's home alone grants, and the groups of a worker killed with SIGKILL talk again.
@Suite("Workers of one host as relays of a fleet", .serialized, .integration)
struct FleetWorkersCLITests {
    typealias Relays = GroupAcrossRelaysCLITests

    /// The host: two workers of one event loop each, trunks at `trunkPort` and `trunkPort + 1`.
    static func host(store: UInt16, directory: URL, trunkPort: UInt16) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--workers", "2", "--event-loops", "1", "--cert",
                Fixtures.serverCert, "--key", Fixtures.serverKey, "--talk-groups", "--fleet",
                "redis://127.0.0.1:\(store)", "--anti-replay", "redis://127.0.0.1:\(store)", "--ticket-key",
                directory.appendingPathComponent("ticket.key").path, "--reset-secret",
                directory.appendingPathComponent("reset.secret").path, "--trunk-listen", "127.0.0.1:\(trunkPort)",
                "--trunk-ca", Fixtures.ca, "--relay-id", "host", "--events",
            ])
    }

    /// A relay of one process and the host (`host(store:directory:trunkPort:)`) in `directory` on `redis`'s fleet,
    /// once the relay has a trunk up to each of the host's workers: their PIDs and fleet names (`host#INDEX.PID`) by
    /// slot. The caller stops both relays.
    static func hostBesideARelay(
        _ redis: RedisTestServer, in directory: URL
    ) async throws -> (other: ChildServer, host: ChildServer, trunkPort: UInt16, pids: [Int32], workers: [String]) {
        let other = try await Relays.relay(store: redis.port, directory: directory)
        let trunkPort = StablePort.random()
        let host: ChildServer
        do {
            host = try await Self.host(store: redis.port, directory: directory, trunkPort: trunkPort)
        } catch {
            other.stopNow()
            throw error
        }
        do {
            let processes = try await WorkerProcessTests.waitForWorkers(of: host.processIdentifier, count: 2)
            let pids = try (0..<2).map { index in try #require(processes.first { $0.value == index }?.key) }
            let workers = pids.enumerated().map { "host#\($0.offset).\($0.element)" }
            #expect(await trunksUp(other, to: workers) == [])
            return (other, host, trunkPort, pids, workers)
        } catch {
            other.stopNow()
            host.stopNow()
            throw error
        }
    }

    /// Reads `relay`'s lines (at most 30 s) until it reported a trunk up to each of `peers`; those it did not.
    static func trunksUp(_ relay: ChildServer, to peers: [String]) async -> [String] {
        await Relays.waitFor(
            relay, within: .seconds(30), Dictionary(uniqueKeysWithValues: peers.map { ($0, Relays.trunkUp(to: $0)) }))
    }

    /// The relay `user` is recorded on in the fleet's store (nil: not recorded yet).
    static func relay(of user: String, in redis: RedisTestServer) -> String? {
        guard case .bulk(let bytes?) = try? redis.command(["GET", "ptt-fleet:member:\(user)"]) else { return nil }
        let words = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        return words.first { $0.hasPrefix("relay=") }.map { String($0.dropFirst(6)) }
    }

    /// Waits (at most 15 s) for `user`'s record in the store: the relay it is on.
    static func recorded(_ user: String, in redis: RedisTestServer) async throws -> String {
        try await withTimeout(.seconds(15)) {
            while true {
                if let relay = relay(of: user, in: redis) { return relay }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Listeners of `group` on `host`, started one by one until the store shows members on both workers (at most
    /// 16: the kernel's hash of each phone's source port picks its worker).
    static func listenersOnBothWorkers(
        _ host: ChildServer, group: String, redis: RedisTestServer
    ) async throws -> [(user: String, worker: String, phone: Task<String, any Error>)] {
        var started: [(user: String, worker: String, phone: Task<String, any Error>)] = []
        for index in 0..<16 where Set(started.map(\.worker)).count < 2 {
            let user = "la\(index)"
            let phone = Task { try await Relays.phone(host, user: user, group: group, ["--listen", "40"]) }
            started.append((user, try await recorded(user, in: redis), phone))
        }
        return started
    }

    /// The JSON lines `relay` printed about `user` until it was quiet for 300 ms.
    static func lines(of relay: ChildServer, about user: String) async -> [String] {
        var seen: [String] = []
        while let line = await relay.line(startingWith: "{", within: .milliseconds(300)) {
            if line.contains("\"user\":\"\(user)\"") { seen.append(line) }
        }
        return seen
    }

    @Test func membersOnTwoWorkersAndAnotherRelayHearABurstOneFloorAndAKilledWorkersGroupsTalkAgain() async throws {
        let redis = try await RedisTestServer.start()
        let directory = try ConnectRelayDiesTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Each worker is a relay named host#INDEX.PID; the other relay trunks to both, and the workers to each
        // other, at PORT and PORT+1.
        let (other, host, trunkPort, pids, workers) = try await Self.hostBesideARelay(redis, in: directory)
        defer {
            other.stopNow()
            host.stopNow()
        }
        #expect(await Self.trunksUp(host, to: workers) == [])
        for (index, worker) in workers.enumerated() {
            guard case .bulk(let address?) = try redis.command(["HGET", "ptt-fleet:trunks", worker]) else {
                Issue.record("\(worker) published no trunk address")
                continue
            }
            #expect(String(decoding: address, as: UTF8.self) == "127.0.0.1:\(Int(trunkPort) + index)")
        }
        let names = [other.address] + workers
        // A group homed on the other relay: its floor is decided there for talkers on either worker.
        let group = try #require(
            (0..<1000).lazy.map { "workers-\($0)" }.first { RendezvousOrder.home($0, over: names) == names[0] })

        // Members on both workers of the host and one on the other relay hear a whole burst from the host.
        let listeners = try await Self.listenersOnBothWorkers(host, group: group, redis: redis)
        #expect(Set(listeners.map(\.worker)) == Set(workers), "listeners on \(listeners.map(\.worker))")
        let remote = Task { try await Relays.phone(other, user: "lb", group: group, ["--listen", "40"]) }
        #expect(try await Self.recorded("lb", in: redis) == other.address)
        // A denial (#6) means ask again, as a phone does; what each relay printed about it is kept for the log.
        let talked = try await Relays.talkUntilGranted(host, user: "bob", group: group, frames: 25) { said, attempt in
            let lines = [await Self.lines(of: host, about: "bob"), await Self.lines(of: other, about: "bob")]
            print("diagnostic: bob's attempt \(attempt): \(said); host said \(lines[0]); other said \(lines[1])")
        }
        #expect(Relays.floor(talked) == ["granted", "released"], "\(talked)")

        // Contested requests from the host's workers and the other relay at once: the home grants one at a time.
        _ = await Relays.floorLines(of: other, group: group, quietFor: .milliseconds(300))
        let contenders = ["ta0", "ta1", "ta2"].map { user in
            Task { try await Relays.phone(host, user: user, group: group, ["--talk", "5"]) }
        }
        let fromOther = try await Relays.phone(other, user: "tb", group: group, ["--talk", "5"])
        var contested = [Relays.floor(fromOther)]
        for contender in contenders { contested.append(Relays.floor(try await contender.value)) }
        #expect(contested.contains { $0.contains("granted") }, "\(contested)")
        let atHome = await Relays.floorLines(of: other, group: group, quietFor: .seconds(1))
        Relays.expectOneFloorAtATime(atHome)
        #expect(atHome.contains { $0.hasPrefix("granted") }, "\(atHome)")

        for listener in listeners {
            let heard = Relays.bursts(try await listener.phone.value).filter { $0["talker"] as? String == "bob" }
            #expect(heard.count == 1, "\(listener.user) on \(listener.worker) heard \(heard)")
            #expect(
                heard.first?["frames"] as? Int == 25 && heard.first?["missing"] as? Int == 0,
                "\(listener.user) on \(listener.worker): \(heard)")
        }
        let heardRemotely = Relays.bursts(try await remote.value).filter { $0["talker"] as? String == "bob" }
        #expect(heardRemotely.count == 1 && heardRemotely.first?["missing"] as? Int == 0, "\(heardRemotely)")

        // A group homed on worker 0, which is killed: the group re-homes, talks again and the other relay's member
        // hears it (the restarted worker is a relay of another name).
        let homed = try #require(
            (0..<1000).lazy.map { "killed-\($0)" }.first { RendezvousOrder.home($0, over: names) == workers[0] })
        let survivor = Task { try await Relays.phone(other, user: "sb", group: homed, ["--listen", "30"]) }
        #expect(try await Self.recorded("sb", in: redis) == other.address)
        let clock = ContinuousClock()
        kill(pids[0], SIGKILL)
        let killed = clock.now
        var regranted: Duration?
        while regranted == nil, clock.now - killed < .seconds(20) {
            let attempt = try await Relays.phone(other, user: "carol", group: homed, ["--talk", "10"])
            if Relays.floor(attempt).contains("granted") { regranted = clock.now - killed }
        }
        let took = try #require(regranted, "the killed worker's group did not talk again within 20 s")
        print("measure: a group homed on a SIGKILLed worker talks again \(took) after (CLI, loaded machine)")
        let heard = Relays.bursts(try await survivor.value).filter { $0["talker"] as? String == "carol" }
        #expect(heard.count == 1 && heard.first?["frames"] as? Int == 10, "sb heard \(heard)")
        #expect(heard.first?["missing"] as? Int == 0, "sb heard \(heard)")
    }
}
