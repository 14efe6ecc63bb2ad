import ChildProcesses
import Foundation
import TestSupport
import Testing

/// Issue 31, item 3: GnuTLS ignores bytes after a ticket's MAC, so the store keys a claim on what the MAC covers: a
/// used ticket with bytes appended (what only its holder can do) is the same ticket, refused as a replay at the
/// relay that claimed it and at another relay of the fleet, over QUIC and over TCP (QMux).
@Suite(
    "0-RTT anti-replay on Redis: a ticket carries 0-RTT once whatever follows its MAC", .serialized,
    .enabled(if: RedisTestServer.available || peersRequired), .integration)
struct RedisTicketTailTests {
    @Test(arguments: ["quic", "tcp"])
    func aUsedTicketWithBytesAppendedIsAReplay(transport: String) async throws {
        let (directory, keyFile, redis) = try await RedisAntiReplayTests.fleet()
        defer { try? FileManager.default.removeItem(at: directory) }
        let relayA = try await RedisAntiReplayTests.relay(transport, keyFile: keyFile, redis: redis)
        defer { relayA.stopNow() }
        let relayB = try await RedisAntiReplayTests.relay(transport, keyFile: keyFile, redis: redis)
        defer { relayB.stopNow() }
        try await Task.sleep(for: .milliseconds(1100))
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        #expect(
            try await RedisAntiReplayTests.wake(relayA.address, transport, session: path("s.bin"))["resumed"] as? Bool
                == false)
        let used = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path("s.bin"))))
        #expect(
            try await RedisAntiReplayTests.wake(relayA.address, transport, session: path("s.bin"))["early_data"]
                as? String == "accepted")

        for (index, (relay, extra)) in [
            (relayA, [UInt8](repeating: 0x41, count: 16)), (relayB, [0x00]),
            (relayB, [UInt8](repeating: 7, count: 200)),
        ].enumerated() {
            let port = try #require(UInt16(relay.address.split(separator: ":").last ?? ""))
            let tampered = try TicketTamper.appending(extra, toTicketInSession: used, transport: transport, port: port)
            try Data(tampered).write(to: URL(fileURLWithPath: path("tampered-\(index).bin")))
            let wake = try await RedisAntiReplayTests.wake(
                relay.address, transport, session: path("tampered-\(index).bin"))
            #expect(wake["resumed"] as? Bool == true, "GnuTLS resumes the ticket whatever follows its MAC: \(wake)")
            #expect(wake["early_data"] as? String == "rejected", "… but it is the same ticket: \(wake)")
        }
        let atA = await RedisKeyLossTests.latestCounters(relayA)
        let atB = await RedisKeyLossTests.latestCounters(relayB)
        #expect(RedisAntiReplayTests.count(atA, "accepted") == 1)
        #expect(RedisAntiReplayTests.count(atA, "replays_refused") >= 1, "\(atA ?? [:])")
        #expect(RedisAntiReplayTests.count(atB, "accepted") == 0)
        #expect(RedisAntiReplayTests.count(atB, "replays_refused") >= 2, "\(atB ?? [:])")
        #expect(try redis.claimCount() == 2, "one claim in Redis: the marker and the ticket")
    }
}
