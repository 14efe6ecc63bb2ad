import ChildProcesses
import Foundation
import TestSupport
import Testing
import TransportCore

@testable import TransportIO

/// Issue 31, item 2: the relay's 0-RTT budget is spent only by claims that could succeed. A replay of a ticket this
/// relay claimed is refused from its memory of recent claims, without a round trip; a ticket another relay claimed
/// costs one round trip, and its grant comes back when Redis says it was claimed. So one ticket replayed 100,000
/// times leaves an honest phone's fresh ticket its 0-RTT.
@Suite(
    "0-RTT anti-replay on Redis: replays cost no budget", .serialized,
    .enabled(if: RedisTestServer.available || peersRequired), .integration)
struct RedisReplayBudgetTests {
    /// This relay's store on `loop`, with a budget of `capacity` claims.
    static func admission(
        _ redis: RedisTestServer, loop: EventLoop, capacity: Int
    ) async throws -> (RedisAntiReplayShared, UnsafeTransfer<RedisAntiReplay>) {
        let shared = RedisAntiReplayShared(
            endpoint: RedisStoreEndpoint(
                host: "127.0.0.1", port: redis.port, database: 0, deadline: 500_000_000, keyPrefix: "ptt-0rtt:",
                clockSkewAllowance: 0),
            capacity: capacity, windowSeconds: 3600)
        let admission = try await loop.submit { UnsafeTransfer(RedisAntiReplay(shared: shared, loop: loop)) }
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while try await !loop.submit({ admission.value.isConnected }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        return (shared, admission)
    }

    /// `admit`, then (when it asks) `claim`, on the loop: whether the ticket's early data is accepted.
    static func wake(
        _ ticket: TicketDigest, _ admission: UnsafeTransfer<RedisAntiReplay>, loop: EventLoop
    ) async throws
        -> Bool
    {
        try await withCheckedThrowingContinuation { continuation in
            loop.execute {
                switch admission.value.admit(ticket, recordingStart: Int64.max) {
                case .accept: continuation.resume(returning: true)
                case .refuse: continuation.resume(returning: false)
                case .ask: admission.value.claim(ticket) { continuation.resume(returning: $0) }
                }
            }
        }
    }

    static func ticket() -> TicketDigest { TicketDigest(digestBytes: (0..<16).map { _ in UInt8.random(in: 0...255) }) }

    @Test func oneTicketReplayed100000TimesLeavesAFreshTicketItsZeroRTT() async throws {
        let redis = try await RedisTestServer.start()
        let loop = try EventLoop(name: "claims")
        defer { loop.shutdown() }
        let (shared, relay) = try await Self.admission(redis, loop: loop, capacity: 30)
        let used = Self.ticket()
        #expect(try await Self.wake(used, relay, loop: loop), "the ticket's first use")
        #expect(shared.budgetUsed == 1)

        let refused = try await loop.submit {
            (0..<100_000).filter { _ in relay.value.admit(used, recordingStart: Int64.max) == .refuse }.count
        }
        #expect(refused == 100_000, "every replay refused at once, without asking Redis")
        #expect(shared.snapshot.duplicates == 100_000)
        #expect(shared.budgetUsed == 1, "and without spending the budget")
        #expect(try redis.claimCount() == 2, "Redis holds the marker and the one claim")

        let fresh = Self.ticket()
        #expect(try await Self.wake(fresh, relay, loop: loop), "an honest phone's fresh ticket carries 0-RTT")
        #expect(try redis.claimCount() == 3, "the marker and two claims")

        // A ticket another relay of the fleet claimed: one round trip here, the grant given back, then refused at once.
        let otherLoop = try EventLoop(name: "other-relay")
        defer { otherLoop.shutdown() }
        let (_, otherRelay) = try await Self.admission(redis, loop: otherLoop, capacity: 30)
        let elsewhere = Self.ticket()
        #expect(try await Self.wake(elsewhere, otherRelay, loop: otherLoop))
        for _ in 0..<1000 { #expect(!(try await Self.wake(elsewhere, relay, loop: loop))) }
        #expect(shared.budgetUsed == 2, "the duplicate's grant came back")
        #expect(shared.snapshot.duplicates == 101_000)
        for _ in 0..<28 { #expect(try await Self.wake(Self.ticket(), relay, loop: loop)) }
        #expect(!(try await Self.wake(Self.ticket(), relay, loop: loop)), "the budget still binds fresh tickets")
        #expect(shared.snapshot.overBudget == 1)
        try await loop.submit { relay.value.stop() }
        try await otherLoop.submit { otherRelay.value.stop() }
    }

    /// End to end, QUIC and TCP: relays with a budget of 10 claims; a used ticket replayed 20 times, half to the relay
    /// that claimed it and half to another relay of the fleet; then honest phones whose tickets were issued before
    /// the flood wake at each relay in 0-RTT.
    @Test(arguments: ["quic", "tcp"])
    func aReplayFloodLeavesHonestPhonesTheirZeroRTT(transport: String) async throws {
        let (directory, keyFile, redis) = try await RedisAntiReplayTests.fleet()
        defer { try? FileManager.default.removeItem(at: directory) }
        let budget = ["--zero-rtt-tickets", "10"]
        let relayA = try await RedisAntiReplayTests.relay(transport, keyFile: keyFile, url: redis.url, budget)
        defer { relayA.stopNow() }
        let relayB = try await RedisAntiReplayTests.relay(transport, keyFile: keyFile, url: redis.url, budget)
        defer { relayB.stopNow() }
        try await Task.sleep(for: .milliseconds(1100))
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        for (honest, relay) in [("honest-a.bin", relayA), ("honest-b.bin", relayB)] {
            let cold = try await RedisAntiReplayTests.wake(relay.address, transport, session: path(honest))
            #expect(cold["resumed"] as? Bool == false)
        }
        #expect(
            try await RedisAntiReplayTests.wake(relayA.address, transport, session: path("used.bin"))["resumed"]
                as? Bool == false)
        let usedState = try Data(contentsOf: URL(fileURLWithPath: path("used.bin")))
        let first = try await RedisAntiReplayTests.wake(relayA.address, transport, session: path("used.bin"))
        #expect(first["early_data"] as? String == "accepted")

        var outcomes: [String] = []
        for attempt in 0..<20 {
            let relay = attempt % 2 == 0 ? relayA : relayB
            let port = try #require(UInt16(relay.address.split(separator: ":").last ?? ""))
            try Data(try TicketTamper.retargeted([UInt8](usedState), toPort: port))
                .write(to: URL(fileURLWithPath: path("replay.bin")))
            let replay = try await RedisAntiReplayTests.wake(relay.address, transport, session: path("replay.bin"))
            #expect(replay["resumed"] as? Bool == true, "the replay resumes (only its early data is refused)")
            outcomes.append(replay["early_data"] as? String ?? "")
        }
        #expect(outcomes == Array(repeating: "rejected", count: 20), "a used ticket never carries 0-RTT again")
        for (honest, relay) in [("honest-a.bin", relayA), ("honest-b.bin", relayB)] {
            let wake = try await RedisAntiReplayTests.wake(relay.address, transport, session: path(honest))
            #expect(wake["early_data"] as? String == "accepted", "an honest phone after the flood: \(wake)")
        }
    }
}
