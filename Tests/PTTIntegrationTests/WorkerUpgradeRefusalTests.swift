import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing

extension WorkerUpgradeTests {
    /// An upgrade asked for while the previous upgrade's old generation still drains is refused and logged
    /// (`upgrade_refused`: that generation's set of sockets is the one the next generation would take). A plain
    /// connection (not a link: it never moves) holds its old worker's drain open for the relay's 30 s
    /// `--drain-seconds`, so the second SIGUSR2 finds that worker still running; the test waits for the log line,
    /// not for a time. Nothing changes: no worker starts or ends, the held connection and new ones are served; once
    /// the held connection has left, the old generation is gone and the next upgrade works.
    @Test func anUpgradeWhileTheOldGenerationStillDrainsIsRefused() async throws {
        let (directory, relay, address, first) = try await Self.start()
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let client = TCPFallbackTests.client(.quicOnly)
        let held = try await HostilePeerTests.Call(address, client: client)
        #expect(try await held.roundTrip("before"))

        kill(relay.processIdentifier, SIGUSR2)
        try await withTimeout(.seconds(40)) { _ = try await held.connection.relayDraining() }
        // The new generation serves; of the old one only the worker holding `held` is left (the other had no
        // connection and ended).
        let upgraded = try await Self.waitForWorkers(of: relay) {
            $0.count == 3 && $0.values.filter { $0 >= 2 }.count == 2
        }
        let holder = try #require(upgraded.first { $0.value < 2 })
        #expect(first[holder.key] != nil, "the worker left is one of the first generation's")

        kill(relay.processIdentifier, SIGUSR2)
        let refusal = await relay.errorLine(containing: "\"event\":\"upgrade_refused\"", within: .seconds(60))
        #expect(refusal?.contains("the previous generation still drains") == true, "\(refusal ?? "none logged")")
        #expect(WorkerProcessTests.workers(of: relay.processIdentifier) == upgraded, "no worker started or ended")
        #expect(try await held.roundTrip("after the refusal"), "the draining worker still serves its connection")
        let fresh = try await HostilePeerTests.Call(address, client: client)
        #expect(try await fresh.roundTrip("new"), "the serving generation takes new connections")
        await fresh.connection.close()

        await held.connection.close()
        _ = try await Self.waitForGeneration(of: relay, firstLoops: [2, 3])
        kill(relay.processIdentifier, SIGUSR2)
        let third = try await Self.waitForGeneration(of: relay, firstLoops: [0, 1])
        #expect(Set(third.keys).isDisjoint(with: first.keys), "a new generation on the first set")
        _ = await relay.stop()
        let log = relay.errorOutput()
        #expect(log.components(separatedBy: "\"event\":\"upgrade_refused\"").count == 2, "one refusal: \(log)")
        #expect(log.components(separatedBy: "\"event\":\"upgraded\"").count == 3, "two upgrades: \(log)")
    }
}
