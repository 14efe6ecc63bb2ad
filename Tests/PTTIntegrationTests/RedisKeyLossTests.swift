import ChildProcesses
import Foundation
import Glibc
import TestSupport
import Testing
import TransportCore

/// Issue 31, item 1: the store loses keys without restarting, or the relays are switched to another Redis behind
/// the proxy that keeps their connections — and no used ticket carries 0-RTT again, and a captured first flight
/// replayed is refused. Two relays (A and B) share a ticket key and a Redis behind `RedisPathProxy`; a phone wakes
/// in 0-RTT at A through an attacker that records the first flight; its used ticket is kept. Then the loss; then
/// the used ticket is presented at B (which never saw it, so only the store can tell) and the recorded flight is
/// replayed to B: neither is accepted. The next wakes get 0-RTT back.
@Suite(
    "0-RTT anti-replay on Redis: no key loss lets a used ticket in", .serialized,
    .enabled(if: RedisTestServer.available || peersRequired), .integration)
struct RedisKeyLossTests {
    enum Loss: String, CaseIterable, CustomTestStringConvertible {
        case flushAll, deleteTheKey, deleteTheMarker, eviction, switchToAnEmptyRedis, switchToARedisUsedBefore
        var testDescription: String { rawValue }
    }

    typealias Fleet = RedisAntiReplayTests

    @Test(arguments: Loss.allCases, ["quic", "tcp"])
    func aUsedTicketAndAReplayedFlightAreRefusedAfter(_ loss: Loss, transport: String) async throws {
        let (directory, keyFile, redis) = try await Self.fleet(loss)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A Redis the fleet used before, with its own marker from then: a proxy may switch the relays to it.
        let other = try await RedisTestServer.start()
        if loss == .switchToARedisUsedBefore {
            let read = RedisClaimScript.command(
                prefix: "ptt-0rtt:",
                .init(
                    belief: "", nowMilliseconds: Self.wallClock(), lastClaimMilliseconds: 0, ticket: "",
                    lifetimeMilliseconds: 1000),
                byHash: false)
            #expect(RedisClaimScript.reply(try other.command(read)) != nil, "the other Redis has a marker")
        }
        let proxy = try RedisPathProxy(upstream: redis.port)
        defer { proxy.stop() }
        let relayA = try await Fleet.relay(transport, keyFile: keyFile, url: proxy.url())
        defer { relayA.stopNow() }
        let relayB = try await Fleet.relay(transport, keyFile: keyFile, url: proxy.url())
        defer { relayB.stopNow() }
        let portA = try #require(relayA.address.split(separator: ":").last)
        let portB = try #require(relayB.address.split(separator: ":").last)
        let ports = directory.appendingPathComponent("ports").path
        try "\(portB)".write(toFile: ports, atomically: true, encoding: .utf8)
        let attacker = try await ChildServer.start(
            peerPython ?? "/usr/bin/python3",
            [Fleet.replayer, String(portA), "--transport", transport == "tcp" ? "tcp" : "udp", "--ports-file", ports])
        defer { attacker.stopNow() }
        try await Task.sleep(for: .milliseconds(1100))  // past the second the relays first saw Redis' memory

        let session = directory.appendingPathComponent("session.bin").path
        let used = directory.appendingPathComponent("used.bin").path
        #expect(try await Fleet.wake(attacker.address, transport, session: session)["resumed"] as? Bool == false)
        try FileManager.default.copyItem(atPath: session, toPath: used)
        let warm = try await Fleet.wake(attacker.address, transport, session: session)
        #expect(warm["early_data"] as? String == "accepted", "the wake's 0-RTT at A: \(warm)")
        #expect(await Fleet.counters(relayA) { Fleet.count($0, "accepted") == 1 } != nil)

        // B serves its own phones in 0-RTT too, so it has a live connection to the store when the loss comes.
        let other1 = directory.appendingPathComponent("b-phone.bin").path
        #expect(try await Fleet.wake(relayB.address, transport, session: other1)["resumed"] as? Bool == false)
        #expect(try await Fleet.wake(relayB.address, transport, session: other1)["early_data"] as? String == "accepted")

        try await Self.lose(loss, redis: redis, other: other, proxy: proxy)

        let usedAtB = try TicketTamper.retargeted(
            [UInt8](Data(contentsOf: URL(fileURLWithPath: used))), toPort: try #require(UInt16(portB)))
        try Data(usedAtB).write(to: URL(fileURLWithPath: used))
        let replay = try await Fleet.wake(relayB.address, transport, session: used)
        #expect(replay["resumed"] as? Bool == true, "the used ticket resumes at B: \(replay)")
        #expect(replay["early_data"] as? String == "rejected", "the used ticket at B after \(loss): \(replay)")
        kill(attacker.processIdentifier, SIGUSR1)
        let replayed = try #require(jsonObject(await attacker.line(startingWith: "{", within: .seconds(15)) ?? ""))
        #expect((replayed["flight_bytes"] as? Int ?? 0) > 0, "\(replayed)")
        // Whatever B refused, and why, it accepted nothing.
        let atB = try #require(await Self.latestCounters(relayB), "B counted its refusals")
        #expect(Fleet.count(atB, "accepted") == 1, "B accepted its own phone's wake and nothing after \(loss): \(atB)")
        #expect(Fleet.count(atB, "refused_store_memory_lost") >= 1, "the store's lost memory was seen: \(atB)")

        // 0-RTT comes back: the next wakes (A's state was issued before the loss; a ticket issued after works).
        var earlyData: [String] = []
        for _ in 0..<4 where earlyData.last != "accepted" {
            try await Task.sleep(for: .milliseconds(1100))
            earlyData.append(
                try await Fleet.wake(relayA.address, transport, session: session)["early_data"] as? String ?? "")
        }
        #expect(earlyData.last == "accepted", "0-RTT back after \(loss): \(earlyData)")
    }

    /// The scratch directory, the ticket key's path, and the Redis (small and evicting for `eviction`).
    static func fleet(_ loss: Loss) async throws -> (URL, String, RedisTestServer) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let options = loss == .eviction ? ["--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru"] : []
        let redis = try await RedisTestServer.start(options: options)
        return (directory, directory.appendingPathComponent("ticket.key").path, redis)
    }

    static func lose(_ loss: Loss, redis: RedisTestServer, other: RedisTestServer, proxy: RedisPathProxy) async throws {
        switch loss {
        case .flushAll:
            #expect(try redis.command(["FLUSHALL"]) == .simpleString("OK"))
        case .deleteTheKey:
            #expect(try redis.command(["DEL", RedisTestServer.claimsKey]) == .integer(1))
        case .deleteTheMarker:
            #expect(try redis.command(["ZREMRANGEBYSCORE", RedisTestServer.claimsKey, "+inf", "+inf"]) == .integer(1))
        case .eviction:
            // Other data fills the Redis until the policy evicts the claims (with the marker: one key).
            let value = String(repeating: "x", count: 64 * 1024)
            var filled = 0
            while try redis.command(["EXISTS", RedisTestServer.claimsKey]) == .integer(1) && filled < 5000 {
                try redis.command(["SET", "filler:\(filled)", value])
                filled += 1
            }
            #expect(try redis.command(["EXISTS", RedisTestServer.claimsKey]) == .integer(0), "evicted after \(filled)")
        case .switchToAnEmptyRedis, .switchToARedisUsedBefore:
            proxy.switchUpstream(to: other.port)
        }
    }

    /// The relay's last "anti_replay" line once they stopped coming (half a second without one).
    static func latestCounters(_ relay: ChildServer) async -> [String: Any]? {
        var latest: [String: Any]?
        var within = Duration.seconds(5)
        while let line = await relay.line(startingWith: "{\"accepted\"", within: within), let object = jsonObject(line)
        {
            latest = object
            within = .milliseconds(500)
        }
        return latest
    }

    static func wallClock() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
