import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing

/// Issue 31, item 6: a relay restarted after a crash resets the clients its peer snapshot lists. The snapshot
/// recorded each connection's current address even when no one proved it, so one spoofed 39-byte PING per
/// connection put a victim there and the restart sent it 8 resets per connection (11.41× the spoofed bytes). Now the
/// snapshot keeps only addresses a client proved and a restart sends an address at most three times what it had
/// sent: `Tests/Peers/quic_snapshot_reflector.py` moves 20 connections to a victim address (127.0.0.2), one spoofed
/// PING each, just before the relay is killed and restarted, and counts what reaches the victim — in every restart
/// mode. An honest listening phone still comes back at once.
@Suite(.serialized, .integration) struct SnapshotReflectionTests {
    enum Mode: String, CaseIterable, Sendable {
        /// SIGKILL, then a restart on the same port.
        case crash
        /// SIGKILL, a restart, SIGKILL again as soon as it listens, and a restart.
        case repeatedCrashes
        /// `--workers 2`: each worker killed in turn, and restarted by the parent.
        case workers
    }

    static let reflector = "\(AioquicInteropTests.peers)/quic_snapshot_reflector.py"

    @Test(arguments: Mode.allCases)
    func aRestartSendsAVictimNoMoreThanThreeTimesWhatItSent(mode: Mode) async throws {
        let python = try AioquicInteropTests.python
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-reflect-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (port, relay) = try await StablePort.first { port in
            (port, try await Self.serve(port, in: directory, workers: mode == .workers))
        }
        defer { relay.kill() }
        if mode == .workers { _ = try await WorkerProcessTests.waitForWorkers(of: relay.processIdentifier, count: 2) }

        // An honest phone that only listens, in the snapshot.
        let (link, phone) = try await CrashRecoveryTests.listeningPhone(port: port)
        defer { link.stop() }
        try await CrashRecoveryTests.waitUntilListed(phone, in: directory)

        // 20 connections moved to the victim once each, one every 100 ms: while the relay probes V for about a
        // second after each move, about half of them are always there, and the relay is killed right after.
        let attacker = try await ChildServer.start(
            python,
            [
                Self.reflector, "127.0.0.1", "\(port)", "--ca", Fixtures.ca, "--connections", "20", "--spoof-seconds",
                "2", "--cycle", "2",
            ], readyWithin: .seconds(60))
        defer { attacker.kill() }
        let spoofed = await attacker.line(startingWith: "{\"event\": \"spoofed\"", within: .seconds(60))
        #expect(spoofed != nil, "the attacker never finished spoofing")

        var restartedAt = ContinuousClock.now
        var afterCrash: Int?
        switch mode {
        case .crash, .repeatedCrashes:
            relay.kill()
            afterCrash = try await Self.victimBytes(attacker)  // the crashed relay's probes are all in
            if mode == .repeatedCrashes {
                let again = try await Self.serve(port, in: directory, workers: false)
                again.kill()
            }
            restartedAt = ContinuousClock.now
            let restarted = try await Self.serve(port, in: directory, workers: false)
            defer { restarted.kill() }
            // 10 s from before the restart (a process start on a loaded machine), below the 15 s keep-alive a phone
            // would wait without the reset.
            try await Self.expectBack(link, before: phone, within: .seconds(10), of: restartedAt)
        case .workers:
            for index in 0..<2 {
                let workers = try await WorkerProcessTests.waitForWorkers(of: relay.processIdentifier, count: 2)
                let victim = try #require(workers.first { $0.value == index }?.key)
                kill(victim, SIGKILL)
                restartedAt = ContinuousClock.now
                // The successor resets its clients while it binds, before it says it listens.
                let listening = await relay.line(startingWith: "listening on", within: .seconds(20))
                #expect(listening != nil, "worker \(index) was not started again")
            }
            try await Self.expectBack(link, before: phone, within: .seconds(10), of: restartedAt)
        }

        let (_, output) = await attacker.stop()
        let done = try #require(
            output.split(separator: "\n").compactMap { jsonObject(String($0)) }.first {
                $0["event"] as? String == "done"
            },
            "the attacker printed: \(output)")
        let fromVictim = try #require(done["bytes_from_victim"] as? Int)
        let toVictim = try #require(done["bytes_to_victim"] as? Int)
        #expect(fromVictim > 0 && toVictim <= 3 * fromVictim, "\(toVictim) bytes reached the victim for \(fromVictim)")
        if let afterCrash {
            #expect(toVictim - afterCrash == 0, "the restart sent the victim \(toVictim - afterCrash) bytes: \(done)")
        }
    }

    static func serve(_ port: UInt16, in directory: URL, workers: Bool) async throws -> ChildServer {
        try await CrashRecoveryTests.serve(
            port, in: directory, snapshot: true, workers ? ["--workers", "2", "--event-loops", "1"] : [])
    }

    /// What the victim had received once the attacker says (SIGUSR1).
    static func victimBytes(_ attacker: ChildServer) async throws -> Int {
        kill(attacker.processIdentifier, SIGUSR1)
        let line = try #require(await attacker.line(startingWith: "{\"event\": \"mark\"", within: .seconds(10)))
        return try #require(jsonObject(line)?["bytes_to_victim"] as? Int)
    }

    /// The listening phone's link is on a new, ready connection within `limit` of `start`.
    static func expectBack(
        _ link: TransportLink, before: TransportConnection, within limit: Duration, of start: ContinuousClock.Instant
    ) async throws {
        var after: TransportConnection?
        while after == nil && ContinuousClock.now - start < limit {
            try await Task.sleep(for: .milliseconds(5))
            after = link.connection.flatMap { $0 !== before && $0.status == .ready ? $0 : nil }
        }
        #expect(after != nil, "the honest phone was not back on a new connection within \(limit)")
    }
}
