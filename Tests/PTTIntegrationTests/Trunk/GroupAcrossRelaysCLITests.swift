import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

/// Three relays started with exactly the issue's command line (`serve --listen ADDR:P --talk-groups --fleet
/// redis://H:P --anti-replay redis://H:P --ticket-key F --reset-secret F --events`, no trunk option) and phones as
/// the issue runs them (`connect NAME:P --resolve NAME:P:ADDR --user U --group G (--talk N | --listen S) --json`):
/// the relays trunk to each other on their own ports, members on three relays hear a whole burst, the home alone
/// grants, and the group talks again after its home is killed.
@Suite("One group across three relays, the issue's command lines", .serialized, .integration)
struct GroupAcrossRelaysCLITests {
    /// A relay with the issue's options (and its certificate), on a loopback port of its own.
    static func relay(store: UInt16, directory: URL) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--talk-groups", "--fleet", "redis://127.0.0.1:\(store)", "--anti-replay",
                "redis://127.0.0.1:\(store)", "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--reset-secret", directory.appendingPathComponent("reset.secret").path, "--events",
            ])
    }

    /// A phone of `user` in `group` at `relay`, dialing the certificate's name resolved to the relay's address.
    static func phone(_ relay: ChildServer, user: String, group: String, _ role: [String]) async throws -> String {
        let port = relay.address.split(separator: ":").last.map(String.init) ?? ""
        return try await runProgram(
            Subprocess.cli,
            [
                "connect", "localhost:\(port)", "--resolve", "localhost:\(port):127.0.0.1", "--ca", Fixtures.ca,
                "--user", user, "--group", group, "--json",
            ] + role
        ).stdout
    }

    /// The floor events a phone saw.
    static func floor(_ phone: String) -> [String] {
        (jsonObject(phone)?["floor"] as? [[String: Any]] ?? []).compactMap { $0["event"] as? String }
    }

    /// `user` talks `frames` frames on `relay`, asking again while denied (for up to 30 s), as a phone does: a home
    /// that cannot confirm its lease under load grants nothing for a moment (cause #6). `notGranted` is told of each
    /// attempt that was not granted (its output and number), for the log. Returns the last attempt's output.
    static func talkUntilGranted(
        _ relay: ChildServer, user: String, group: String, frames: Int,
        notGranted: (String, Int) async -> Void = { _, _ in }
    ) async throws -> String {
        var talked = ""
        var attempts = 0
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            attempts += 1
            talked = try await phone(relay, user: user, group: group, ["--talk", "\(frames)"])
            guard floor(talked) != ["granted", "released"] else { break }
            await notGranted(talked, attempts)
            // A phone denied #6 waits a moment before it asks again: the fleet's view settles on its heartbeats.
            if floor(talked) == ["denied"] { try await Task.sleep(for: .milliseconds(250)) }
        } while floor(talked) == ["denied"] && ContinuousClock.now < deadline
        return talked
    }

    /// The bursts a listening phone heard.
    static func bursts(_ phone: String) -> [[String: Any]] { jsonObject(phone)?["bursts"] as? [[String: Any]] ?? [] }

    /// Reads `relay`'s JSON lines (within `limit`) until each condition held for one of them; returns those left
    /// unmet (empty: all met).
    static func waitFor(
        _ relay: ChildServer, within limit: Duration, _ conditions: [String: (String) -> Bool]
    ) async -> [String] {
        var unmet = conditions
        let deadline = ContinuousClock.now.advanced(by: limit)
        while !unmet.isEmpty, ContinuousClock.now < deadline {
            guard let line = await relay.line(startingWith: "{", within: deadline - ContinuousClock.now) else { break }
            for (name, condition) in unmet where condition(line) { unmet[name] = nil }
        }
        return unmet.keys.sorted()
    }

    static func trunkUp(to peer: String) -> (String) -> Bool {
        { $0.contains("\"event\":\"trunk\"") && $0.contains("\"peer\":\"\(peer)\"") && $0.contains("\"state\":\"up\"") }
    }

    static func joined(_ user: String) -> (String) -> Bool {
        { $0.contains("\"event\":\"joined\"") && $0.contains("\"user\":\"\(user)\"") }
    }

    static func home(of group: String) -> (String) -> Bool {
        {
            $0.contains("\"event\":\"home\"") && $0.contains("\"group\":\"\(group)\"")
                && $0.contains("\"role\":\"home\"")
        }
    }

    /// The floor lines of `group` a relay printed so far, in order ("granted alice", "released alice", ...).
    static func floorLines(of relay: ChildServer, group: String, quietFor quiet: Duration) async -> [String] {
        var seen: [String] = []
        while let line = await relay.line(startingWith: "{", within: quiet) {
            guard let object = jsonObject(line), object["event"] as? String == "floor",
                object["group"] as? String == group, let event = object["floor"] as? String,
                let user = object["user"] as? String
            else { continue }
            seen.append("\(event) \(user)")
        }
        return seen
    }

    /// Expects the home's floor lines ("granted alice", "released alice", ...) never to grant while one holds it.
    static func expectOneFloorAtATime(_ atHome: [String]) {
        var holder: String?
        for line in atHome {
            let parts = line.split(separator: " ").map(String.init)
            if parts[0] == "granted" {
                #expect(holder == nil, "\(parts[1]) granted while \(holder ?? "") held the floor: \(atHome)")
                holder = parts[1]
            } else if parts[0] == "released" || parts[0] == "revoked", holder == parts[1] {
                holder = nil
            }
        }
    }

    @Test func membersOnThreeRelaysHearABurstOneFloorAndTheGroupOutlivesItsHome() async throws {
        let redis = try await RedisTestServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-3relays-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var relays: [ChildServer] = []
        defer { for relay in relays { relay.stopNow() } }
        for _ in 0..<3 { relays.append(try await Self.relay(store: redis.port, directory: directory)) }
        // Each relay is named by the address it listens on, and trunks to the two others on that port.
        let names = relays.map(\.address)
        for (index, relay) in relays.enumerated() {
            let others = names.enumerated().filter { $0.offset != index }.map(\.element)
            let unmet = await Self.waitFor(
                relay, within: .seconds(30), Dictionary(uniqueKeysWithValues: others.map { ($0, Self.trunkUp(to: $0)) })
            )
            #expect(unmet.isEmpty, "relay \(names[index]) has no trunk up to \(unmet)")
        }
        let group = try #require(
            (0..<1000).lazy.map { "across-\($0)" }.first { RendezvousOrder.home($0, over: names) == names[0] })
        let (a, b, c) = (relays[0], relays[1], relays[2])

        // A burst from a member of a relay that is not the home, heard on all three relays.
        let listeners = zip(["la", "lb", "lc"], relays).map { user, relay in
            Task { try await Self.phone(relay, user: user, group: group, ["--listen", "15"]) }
        }
        #expect(
            await Self.waitFor(a, within: .seconds(20), ["joined": Self.joined("la"), "home": Self.home(of: group)])
                == [])
        #expect(await Self.waitFor(b, within: .seconds(20), ["joined": Self.joined("lb")]) == [])
        #expect(await Self.waitFor(c, within: .seconds(20), ["joined": Self.joined("lc")]) == [])
        let talked = try await Self.talkUntilGranted(b, user: "bob", group: group, frames: 25)
        #expect(Self.floor(talked) == ["granted", "released"], "\(talked)")
        for (user, listener) in zip(["la", "lb", "lc"], listeners) {
            let heard = Self.bursts(try await listener.value)
            #expect(heard.count == 1, "\(user) heard \(heard)")
            #expect(heard.first?["talker"] as? String == "bob", "\(user) heard \(heard)")
            #expect(heard.first?["frames"] as? Int == 25 && heard.first?["missing"] as? Int == 0, "\(user): \(heard)")
        }

        // Contested requests from the three relays at once: the home grants one at a time.
        _ = await Self.floorLines(of: a, group: group, quietFor: .milliseconds(300))  // the first burst's
        async let fromA = Self.phone(a, user: "ta", group: group, ["--talk", "5"])
        async let fromB = Self.phone(b, user: "tb", group: group, ["--talk", "5"])
        async let fromC = Self.phone(c, user: "tc", group: group, ["--talk", "5"])
        let contested = try await [fromA, fromB, fromC].map(Self.floor)
        #expect(contested.filter { $0.contains("granted") }.count >= 1, "\(contested)")
        let atHome = await Self.floorLines(of: a, group: group, quietFor: .seconds(1))
        Self.expectOneFloorAtATime(atHome)
        #expect(atHome.contains { $0.hasPrefix("granted") }, "\(atHome)")

        // The home is killed: a survivor takes the group over and it talks again; both survivors hear the burst.
        let survivors = [b, c]
        let after = zip(["sb", "sc"], survivors).map { user, relay in
            Task { try await Self.phone(relay, user: user, group: group, ["--listen", "15"]) }
        }
        #expect(await Self.waitFor(b, within: .seconds(20), ["joined": Self.joined("sb")]) == [])
        #expect(await Self.waitFor(c, within: .seconds(20), ["joined": Self.joined("sc")]) == [])
        let clock = ContinuousClock()
        a.kill()
        let killed = clock.now
        var regranted: Duration?
        var attempts = 0
        while regranted == nil, clock.now - killed < .seconds(10) {
            attempts += 1
            let attempt = try await Self.phone(c, user: "carol", group: group, ["--talk", "10"])
            if Self.floor(attempt).contains("granted") { regranted = clock.now - killed }
        }
        let took = try #require(regranted, "the group did not talk again within 10 s of its home's SIGKILL")
        print("measure: group talks again \(took) after its home's SIGKILL (\(attempts) attempts, CLI, loaded machine)")
        // The figure is the measure printed above (each attempt starts a CLI phone, seconds on a loaded machine); the
        // bound is what the listeners' 15 s of listening leave for the takeover, which without one never comes.
        #expect(took < .seconds(10))
        for (user, listener) in zip(["sb", "sc"], after) {
            let heard = Self.bursts(try await listener.value).filter { $0["talker"] as? String == "carol" }
            #expect(heard.count == 1, "\(user) heard \(heard)")
            #expect(heard.first?["frames"] as? Int == 10 && heard.first?["missing"] as? Int == 0, "\(user): \(heard)")
        }
    }
}
