import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Issue 36, item 3: an in-place upgrade of `serve --workers` on one host. SIGUSR2 to the supervisor starts a new
/// generation of workers from the executable on disk, on the group's other set of sockets; new connections go to
/// it, the old generation's connections keep working on their own workers while those drain, and every call
/// (a `TransportLink` sending audio) carries on. The relay runs from a link in a scratch directory, which the tests
/// point at another program to see a failed upgrade leave the old generation serving.
@Suite(.serialized, .integration) struct WorkerUpgradeTests {
    /// A relay started from `directory/ptt-transport` (a symbolic link to the CLI) with 2 workers of 1 loop.
    static func relay(_ directory: URL, _ more: [String] = []) async throws -> ChildServer {
        let executable = directory.appendingPathComponent("ptt-transport").path
        try? FileManager.default.removeItem(atPath: executable)
        try FileManager.default.createSymbolicLink(atPath: executable, withDestinationPath: Subprocess.cli)
        return try await ChildServer.start(
            executable,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--workers", "2", "--event-loops", "1", "--drain-seconds", "30",
                "--ticket-key", directory.appendingPathComponent("t.key").path,
                "--reset-secret", directory.appendingPathComponent("r.key").path,
            ] + more)
    }

    static func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// A scratch directory and a relay started from it (`relay`), once its first generation runs: its address and
    /// its workers. The caller stops the relay and removes the directory.
    static func start(
        _ more: [String] = []
    ) async throws -> (directory: URL, relay: ChildServer, address: ServerAddress, first: [Int32: Int]) {
        let directory = try scratch()
        do {
            let relay = try await Self.relay(directory, more)
            do {
                let address = try #require(ServerAddress(relay.address))
                return (directory, relay, address, try await waitForGeneration(of: relay, firstLoops: [0, 1]))
            } catch {
                relay.stopNow()
                throw error
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Waits until the relay's workers are exactly those whose first loops are `firstLoops` (one generation).
    static func waitForGeneration(of relay: ChildServer, firstLoops: Set<Int>) async throws -> [Int32: Int] {
        try await waitForWorkers(of: relay) { Set($0.values) == firstLoops && $0.count == firstLoops.count }
    }

    /// Waits until the relay's workers (pid → first loop) satisfy `condition`; returns them. The deadline is
    /// generous: an old generation may hold its drain for up to `--drain-seconds` (30 s) and a loaded machine
    /// starts a debug worker slowly.
    static func waitForWorkers(
        of relay: ChildServer, _ condition: @escaping @Sendable ([Int32: Int]) -> Bool
    ) async throws -> [Int32: Int] {
        try await withTimeout(.seconds(90)) {
            while true {
                let workers = WorkerProcessTests.workers(of: relay.processIdentifier)
                if condition(workers) { return workers }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// A call: a link sending a numbered datagram every 20 ms, counting its echoes and its connections.
    final class Call: Sendable {
        let link: TransportLink
        let echoes = Locked(0)
        let connections = Locked(0)
        private let tasks: Locked<[Task<Void, Never>]> = Locked([])

        init(_ address: ServerAddress, client: TransportClient) {
            link = TransportLink(client: client, to: address)
            let (link, echoes, connections) = (link, echoes, connections)
            tasks.withLock {
                $0 = [
                    Task { for await _ in link.datagrams { echoes.withLock { $0 += 1 } } },
                    Task {
                        await link.forEachConnection { connection in
                            connections.withLock { $0 += 1 }
                            _ = try? await connection.closed()
                        }
                    },
                    Task {
                        var index: UInt32 = 0
                        while !Task.isCancelled {
                            let payload =
                                withUnsafeBytes(of: index.bigEndian) { Array($0) } + [UInt8](repeating: 1, count: 60)
                            try? link.sendDatagram(payload, expiresAfter: .milliseconds(100))
                            index &+= 1
                            try? await Task.sleep(for: .milliseconds(20))
                        }
                    },
                ]
            }
        }

        /// Whether the call is up: not stopped, and echoes keep coming (10 more within `limit`).
        func isAlive(within limit: Duration = .seconds(20)) async -> Bool {
            if case .stopped = link.status { return false }
            let before = echoes.withLock { $0 }
            let answered: Void? = try? await withTimeout(limit) {
                while self.echoes.withLock({ $0 }) < before + 10 { try await Task.sleep(for: .milliseconds(20)) }
            }
            return answered != nil
        }

        func end() {
            for task in tasks.withLock({ $0 }) { task.cancel() }
            link.stop()
        }
    }

    /// 20 calls through two upgrades in a row (the sets alternate: first loops 0,1 → 2,3 → 0,1). During the first
    /// upgrade's drain a plain connection left on the old generation (it does not move) still echoes, and a new
    /// connection is served — by the new generation, since a draining worker refuses handshakes. No call drops.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func upgradesUnderLiveCallsDropNoneAndAlternateTheSets(policy: FallbackPolicy) async throws {
        let (directory, relay, address, first) = try await Self.start()
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let client = TCPFallbackTests.client(policy)

        let calls = (0..<20).map { _ in Call(address, client: client) }
        defer { for call in calls { call.end() } }
        for (index, call) in calls.enumerated() {
            #expect(await call.isAlive(), "call \(index) before the upgrade: \(call.link.status)")
        }
        let stay = try await HostilePeerTests.Call(address, client: client)  // stays on the old generation

        kill(relay.processIdentifier, SIGUSR2)
        // The new generation starts; once it serves, the steering moves and the old generation drains (`stay`'s
        // worker is held by it, the other ends once its calls moved).
        let upgraded = try await Self.waitForWorkers(of: relay) { $0.values.filter { $0 >= 2 }.count == 2 }
        #expect(Set(first.keys).isDisjoint(with: upgraded.filter { $0.value >= 2 }.keys))
        try await withTimeout(.seconds(40)) { _ = try await stay.connection.relayDraining() }
        let fresh = try await HostilePeerTests.Call(address, client: client)
        try await fresh.stream.send([7])
        #expect(try await withTimeout(.seconds(10)) { try await fresh.stream.nextMessage()?.bytes } == [7])
        await fresh.connection.close()
        try await stay.stream.send([8])
        #expect(
            try await withTimeout(.seconds(10)) { try await stay.stream.nextMessage()?.bytes } == [8],
            "an old connection keeps working while its worker drains")
        await stay.connection.close()

        let second = try await Self.waitForGeneration(of: relay, firstLoops: [2, 3])
        #expect(Set(second.keys).isDisjoint(with: first.keys), "the old generation drained, none restarted")
        for (index, call) in calls.enumerated() {
            #expect(await call.isAlive(), "call \(index) after the first upgrade: \(call.link.status)")
            #expect(call.connections.withLock { $0 } >= 2, "call \(index) moved to the new generation")
        }

        kill(relay.processIdentifier, SIGUSR2)
        _ = try await Self.waitForGeneration(of: relay, firstLoops: [0, 1])
        #expect(Set(second.keys).isDisjoint(with: WorkerProcessTests.workers(of: relay.processIdentifier).keys))
        for (index, call) in calls.enumerated() {
            #expect(await call.isAlive(), "call \(index) after the second upgrade: \(call.link.status)")
            #expect(call.connections.withLock { $0 } >= 3, "call \(index) moved again")
        }
        for call in calls { call.end() }
        let (_, output) = await relay.stop()
        _ = output
        let log = relay.errorOutput()
        #expect(log.components(separatedBy: "\"event\":\"upgraded\"").count == 3, "two upgrades logged")
    }

    /// With plaintext QUIC-LB IDs the byte naming a socket follows the server ID: the steering reads new
    /// connections' IDs at that offset too, so handshakes complete on either generation and calls move.
    @Test func aRelayWithQUICLBIDsUpgradesToo() async throws {
        let (directory, relay, address, _) = try await Self.start(["--quic-lb", "cr=1,server-id=0a0b,nonce-len=8"])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let calls = (0..<8).map { _ in Call(address, client: TCPFallbackTests.client(.quicOnly)) }
        defer { for call in calls { call.end() } }
        for (index, call) in calls.enumerated() { #expect(await call.isAlive(), "call \(index) before") }
        kill(relay.processIdentifier, SIGUSR2)
        _ = try await Self.waitForGeneration(of: relay, firstLoops: [2, 3])
        for (index, call) in calls.enumerated() {
            #expect(await call.isAlive(), "call \(index) after the upgrade: \(call.link.status)")
            #expect(call.connections.withLock { $0 } >= 2, "call \(index) moved to the new generation")
        }
    }

    /// A new generation that cannot start (the program on disk exits at once) is given up with a typed error in
    /// the log; the old generation keeps serving its calls, and the next upgrade, with a working program, works.
    @Test func aNewGenerationThatFailsToStartLeavesTheOldOneServing() async throws {
        let (directory, relay, address, first) = try await Self.start()
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let calls = (0..<4).map { _ in Call(address, client: TCPFallbackTests.client(.quicOnly)) }
        defer { for call in calls { call.end() } }
        for call in calls { #expect(await call.isAlive()) }

        // The upgraded "program": notes that it ran, then fails.
        let executable = directory.appendingPathComponent("ptt-transport").path
        let marker = directory.appendingPathComponent("tried").path
        try FileManager.default.removeItem(atPath: executable)
        try "#!/bin/sh\ntouch '\(marker)'\nexit 3\n".write(toFile: executable, atomically: true, encoding: .utf8)
        chmod(executable, 0o755)
        kill(relay.processIdentifier, SIGUSR2)
        try await withTimeout(.seconds(20)) {
            while !FileManager.default.fileExists(atPath: marker) { try await Task.sleep(for: .milliseconds(20)) }
        }
        for (index, call) in calls.enumerated() {
            #expect(await call.isAlive(), "call \(index) through the failed upgrade")
            #expect(call.connections.withLock { $0 } == 1, "call \(index) was not moved")
        }
        let after = try await Self.waitForGeneration(of: relay, firstLoops: [0, 1])
        #expect(Set(after.keys) == Set(first.keys), "the old generation's workers kept running")

        // The working program again: this upgrade (queued after the failed one) succeeds — the log says so first,
        // then the old generation drains away.
        try FileManager.default.removeItem(atPath: executable)
        try FileManager.default.createSymbolicLink(atPath: executable, withDestinationPath: Subprocess.cli)
        kill(relay.processIdentifier, SIGUSR2)
        guard await relay.errorLine(containing: "\"event\":\"upgraded\"", within: .seconds(90)) != nil else {
            _ = await relay.stop()
            Issue.record("the upgrade after the failed one did not happen; the relay's log:\n\(relay.errorOutput())")
            return
        }
        _ = try await Self.waitForGeneration(of: relay, firstLoops: [2, 3])
        for (index, call) in calls.enumerated() { #expect(await call.isAlive(), "call \(index) after the upgrade") }
        for call in calls { call.end() }
        _ = await relay.stop()
        let log = relay.errorOutput()
        #expect(log.contains("\"event\":\"upgrade_failed\""), "\(log)")
        #expect(log.contains("exited before it served"), "\(log)")
    }
}
