import ChildProcesses
import Foundation
import Glibc
import TestSupport
import Testing

/// Fleet-wide 0-RTT anti-replay on a real `redis-server` (issue 23, item 2): relays in child processes sharing a
/// ticket key and `--anti-replay redis://…`, woken by `connect --session-file`, over QUIC and over TCP.
@Suite(
    "0-RTT anti-replay on Redis", .serialized, .enabled(if: RedisTestServer.available || peersRequired), .integration)
struct RedisAntiReplayTests {
    static let replayer = "\(Fixtures.root)/Tests/Peers/first_flight_replayer.py"

    /// `serve` with the shared ticket key and Redis, on `port` (0: any), QUIC and TCP or TCP alone.
    static func relay(
        _ transport: String, host: String = "127.0.0.1", port: UInt16 = 0, keyFile: String, redis: RedisTestServer
    ) async throws -> ChildServer {
        try await relay(transport, host: host, port: port, keyFile: keyFile, url: redis.url)
    }

    /// `serve` with the shared ticket key and the store at `url`; `more` options after the others.
    static func relay(
        _ transport: String, host: String = "127.0.0.1", port: UInt16 = 0, keyFile: String, url: String,
        _ more: [String] = []
    ) async throws -> ChildServer {
        let listen =
            transport == "tcp" ? ["--no-udp", "--tcp-listen", "\(host):\(port)"] : ["--listen", "\(host):\(port)"]
        return try await ChildServer.start(
            Subprocess.cli,
            ["serve"] + listen + [
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey, "--ticket-key", keyFile,
                "--anti-replay", url, "--events",
            ] + more)
    }

    /// One wake of `connect` at `address` with the session file (`resolve`: `--resolve NAME:PORT:ADDR`): its JSON.
    static func wake(
        _ address: String, _ transport: String, session: String, resolve: String? = nil
    ) async throws -> [String: Any] {
        let result = try await runProgram(
            Subprocess.cli,
            [
                "connect", address, "--ca", Fixtures.ca, "--session-file", session, "--json", "--transport", transport,
                "--message", "wake up",
            ] + (resolve.map { ["--resolve", $0] } ?? []))
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(jsonObject(result.stdout), "\(result.stdout) \(result.stderr)")
    }

    /// Reads the relay's "anti_replay" lines until one satisfies `condition` (nil if none within 30 s).
    static func counters(
        _ relay: ChildServer, where condition: ([String: Any]) -> Bool
    ) async -> [String: Any]? {
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))  // ends early once a line meets `condition`
        while ContinuousClock.now < deadline {
            guard let line = await relay.line(startingWith: "{\"accepted\"", within: .seconds(10)),
                let object = jsonObject(line)
            else { return nil }
            if condition(object) { return object }
        }
        return nil
    }

    static func count(_ object: [String: Any]?, _ key: String) -> Int { object?[key] as? Int ?? -1 }

    /// A fleet's shared parts: a scratch directory (remove it), where the ticket key goes, and a running Redis.
    static func fleet() async throws -> (directory: URL, keyFile: String, redis: RedisTestServer) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let redis = try await RedisTestServer.start()
        return (directory, directory.appendingPathComponent("ticket.key").path, redis)
    }

    /// A first flight accepted in 0-RTT at relay A, replayed by an on-path attacker to A and to relay B (same
    /// ticket key, same Redis): refused at both. Then Redis restarts empty (its keys are lost), relay C starts,
    /// and the same flight is replayed to B and C: not accepted (the ticket predates what Redis remembers). (Not
    /// to A again over QUIC: A still holds the half-open connection of the first replay, whose Initial has the same
    /// connection ID, so the packets never reach TLS.)
    @Test(arguments: ["quic", "tcp"])
    func aReplayedFirstFlightIsRefusedAtEveryRelay(transport: String) async throws {
        let (directory, keyFile, redis) = try await Self.fleet()
        defer { try? FileManager.default.removeItem(at: directory) }
        let relayA = try await Self.relay(transport, keyFile: keyFile, redis: redis)
        defer { relayA.stopNow() }
        let relayB = try await Self.relay(transport, keyFile: keyFile, redis: redis)
        defer { relayB.stopNow() }
        let portA = try #require(relayA.address.split(separator: ":").last)
        let portB = try #require(relayB.address.split(separator: ":").last)
        let python = peerPython ?? "/usr/bin/python3"
        let ports = directory.appendingPathComponent("ports").path
        try "\(portA),\(portB)".write(toFile: ports, atomically: true, encoding: .utf8)
        let attacker = try await ChildServer.start(
            python,
            [
                Self.replayer, String(portA), "--transport", transport == "tcp" ? "tcp" : "udp",
                "--ports-file", ports,
            ])
        defer { attacker.stopNow() }
        // Tickets issued in the second the relays first saw Redis' memory are not trusted with 0-RTT: let it pass.
        try await Task.sleep(for: .milliseconds(1100))
        let session = directory.appendingPathComponent("session.bin").path

        let cold = try await Self.wake(attacker.address, transport, session: session)
        #expect(cold["resumed"] as? Bool == false)
        let warm = try await Self.wake(attacker.address, transport, session: session)
        #expect(warm["resumed"] as? Bool == true)
        #expect(warm["early_data"] as? String == "accepted")
        let acceptedAtA = await Self.counters(relayA) { Self.count($0, "accepted") == 1 }
        #expect(acceptedAtA != nil, "relay A accepted the wake's early data")

        // Until A forgets the wake's connection (its closing period), the flight's packets route to it, not to TLS.
        try await Task.sleep(for: .seconds(3))
        kill(attacker.processIdentifier, SIGUSR1)
        let replay = try #require(jsonObject(await attacker.line(startingWith: "{", within: .seconds(15)) ?? ""))
        #expect((replay["flight_bytes"] as? Int ?? 0) > 0, "\(replay)")
        let atA = await Self.counters(relayA) { Self.count($0, "replays_refused") >= 1 }
        #expect(Self.count(atA, "accepted") == 1, "A refused the replay: \(atA ?? [:])")
        let atB = await Self.counters(relayB) { Self.count($0, "replays_refused") >= 1 }
        #expect(Self.count(atB, "accepted") == 0, "B refused the replay: \(atB ?? [:])")

        // Redis loses everything; a relay C starts; the same flight again, at B and C.
        redis.stop()
        try await redis.start()
        let relayC = try await Self.relay(transport, keyFile: keyFile, redis: redis)
        defer { relayC.stopNow() }
        let portC = try #require(relayC.address.split(separator: ":").last)
        try "\(portB),\(portC)".write(toFile: ports, atomically: true, encoding: .utf8)
        try await Task.sleep(for: .seconds(1))
        kill(attacker.processIdentifier, SIGUSR1)
        _ = await attacker.line(startingWith: "{", within: .seconds(15))
        // GnuTLS refuses that ticket before asking the store (it predates the store's memory), so nothing counts
        // it: a client's own wakes show that only they were accepted there. (B's first attempt after Redis came
        // back may be refused too, until B learns of the new memory.)
        for (name, relay) in [("B", relayB), ("C", relayC)] {
            let own = directory.appendingPathComponent("session-\(name).bin").path
            #expect(try await Self.wake(relay.address, transport, session: own)["resumed"] as? Bool == false)
            try await Task.sleep(for: .milliseconds(1100))
            var earlyData: [String] = []
            for _ in 0..<3 where earlyData.last != "accepted" {
                earlyData.append(
                    try await Self.wake(relay.address, transport, session: own)["early_data"] as? String ?? "")
            }
            #expect(earlyData.last == "accepted", "\(name): \(earlyData)")
            let counted = await Self.counters(relay) { Self.count($0, "accepted") >= 1 }
            #expect(Self.count(counted, "accepted") == 1, "\(name) accepted its client's wake and not the replay")
        }
    }

    /// Two relays of one name (127.0.0.2 and 127.0.0.3, one port) sharing the ticket key and Redis: a phone's wakes
    /// alternate between them and every one is 0-RTT (state saved against one wakes into the other).
    @Test(arguments: ["quic", "tcp"])
    func wakesMoveBetweenRelaysOfTheFleetInZeroRTT(transport: String) async throws {
        let (directory, keyFile, redis) = try await Self.fleet()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (relays, port) = try await StablePort.first(attempts: 20) { port -> ([ChildServer], UInt16) in
            let first = try await Self.relay(transport, host: "127.0.0.2", port: port, keyFile: keyFile, redis: redis)
            do {
                let second = try await Self.relay(
                    transport, host: "127.0.0.3", port: port, keyFile: keyFile, redis: redis)
                return ([first, second], port)
            } catch {
                first.kill()
                throw error
            }
        }
        defer { for relay in relays { relay.stopNow() } }
        try await Task.sleep(for: .milliseconds(1100))
        let session = directory.appendingPathComponent("session.bin").path
        let name = "localhost:\(port)"
        let cold = try await Self.wake(name, transport, session: session, resolve: "\(name):127.0.0.2")
        #expect(cold["resumed"] as? Bool == false)
        var earlyData: [String] = []
        for host in ["127.0.0.3", "127.0.0.2", "127.0.0.3", "127.0.0.2"] {
            let wake = try await Self.wake(name, transport, session: session, resolve: "\(name):\(host)")
            earlyData.append(wake["early_data"] as? String ?? "")
        }
        #expect(earlyData == Array(repeating: "accepted", count: 4), "alternating relays: \(earlyData)")
    }

    /// A relay restarted with the same ticket key and Redis accepts 0-RTT for a ticket issued before it started.
    /// Redis paused (it answers nothing): the wake succeeds in 1-RTT, counted; resumed: 0-RTT at once. Redis
    /// restarted empty: one wake in 1-RTT (its ticket predates Redis' memory), then 0-RTT again.
    @Test(arguments: ["quic", "tcp"])
    func aRestartedRelayWakesInZeroRTTAndRedisDownFailsClosed(transport: String) async throws {
        let (directory, keyFile, redis) = try await Self.fleet()
        defer { try? FileManager.default.removeItem(at: directory) }
        var relay = try await StablePort.first(attempts: 20) { port in
            try await Self.relay(transport, port: port, keyFile: keyFile, redis: redis)
        }
        let port = try #require(UInt16(relay.address.split(separator: ":").last ?? ""))
        defer { relay.stopNow() }
        try await Task.sleep(for: .milliseconds(1100))
        let session = directory.appendingPathComponent("session.bin").path
        #expect(try await Self.wake(relay.address, transport, session: session)["resumed"] as? Bool == false)

        await relay.stop()
        relay = try await Self.relay(transport, port: port, keyFile: keyFile, redis: redis)
        let afterRestart = try await Self.wake(relay.address, transport, session: session)
        #expect(afterRestart["resumed"] as? Bool == true)
        #expect(afterRestart["early_data"] as? String == "accepted", "a ticket issued before the restart")

        redis.pause()
        let paused = try await Self.wake(relay.address, transport, session: session)
        redis.resume()
        #expect(paused["resumed"] as? Bool == true)
        #expect(paused["early_data"] as? String == "rejected", "Redis answered nothing: fail closed")
        let unavailable = await Self.counters(relay) { Self.count($0, "refused_store_unavailable") >= 1 }
        #expect(unavailable != nil, "the refusal is counted")
        try await Task.sleep(for: .milliseconds(600))  // the reconnect backoff is at most 500 ms
        let back = try await Self.wake(relay.address, transport, session: session)
        #expect(back["early_data"] as? String == "accepted", "0-RTT is back with Redis")

        redis.stop()
        let down = try await Self.wake(relay.address, transport, session: session)
        #expect(down["resumed"] as? Bool == true)
        #expect(down["early_data"] as? String == "rejected", "Redis stopped: fail closed")
        try await redis.start()
        try await Task.sleep(for: .milliseconds(600))
        let results = try await [0, 1, 2].asyncMap { _ in
            try await Task.sleep(for: .milliseconds(1100))
            return try await Self.wake(relay.address, transport, session: session)["early_data"] as? String
        }
        #expect(results.contains("accepted"), "0-RTT returns after Redis restarted empty: \(results)")
        #expect(results.first == "rejected", "a ticket issued while Redis was down predates its memory")
    }
}

extension Array {
    /// `map` with an async transform, one element after the other.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
