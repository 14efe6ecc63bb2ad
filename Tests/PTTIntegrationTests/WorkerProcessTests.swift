import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// `serve --workers N`: the relay's connections in N processes sharing the listening ports. A worker killed with
/// SIGKILL costs only its own clients — the parent starts it again on the same sockets, its successor resets them
/// (over TCP the kernel does), and they resume in 0-RTT (shared ticket key, reset secret and Redis anti-replay store) — while the other
/// worker's clients carry on. SIGTERM drains every worker and the parent exits 0.
@Suite(.serialized, .integration) struct WorkerProcessTests {
    static func relay(redis: RedisTestServer?, directory: URL, _ more: [String] = []) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--workers", "2", "--event-loops", "1", "--ticket-key", directory.appendingPathComponent("t.key").path,
                "--reset-secret", directory.appendingPathComponent("r.key").path,
            ] + (redis.map { ["--anti-replay", $0.url] } ?? []) + more)
    }

    /// The worker processes of `parent` (found by the arguments the parent gives them): pid → first loop.
    static func workers(of parent: Int32) -> [Int32: Int] {
        var found: [Int32: Int] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry),
                let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
            else { continue }
            let arguments = String(decoding: data, as: UTF8.self).split(separator: "\0").map(String.init)
            guard let of = arguments.firstIndex(of: "--worker-of"), arguments.indices.contains(of + 1),
                arguments[of + 1] == "\(parent)", let share = arguments.firstIndex(of: "--worker-sockets"),
                let first = arguments[share + 1].split(separator: ";").first(where: { $0.hasPrefix("first=") })
            else { continue }
            found[pid] = Int(first.dropFirst(6))
        }
        return found
    }

    static func waitForWorkers(
        of parent: Int32, count: Int, replacing old: Set<Int32> = []
    ) async throws -> [Int32: Int] {
        try await withTimeout(.seconds(15)) {
            while true {
                let workers = Self.workers(of: parent)
                if workers.count == count && old.isDisjoint(with: workers.keys) { return workers }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aKilledWorkerCostsOnlyItsOwnClientsWhoRejoinInZeroRTT(policy: FallbackPolicy) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-workers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let redis = try await RedisTestServer.start()
        let relay = try await Self.relay(redis: redis, directory: directory)
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let workers = try await Self.waitForWorkers(of: relay.processIdentifier, count: 2)
        // Both workers listening, and past the second in which the first of them wrote Redis' memory marker: a
        // relay trusts the store for tickets created from the next whole second on (GnuTLS' anti-replay start is
        // in whole seconds), so a ticket from that first second would rejoin in 1-RTT.
        try await Task.sleep(for: .milliseconds(1200))

        // 16 phones (the kernel hashes each one's first packet to a worker: all on one is a 2-in-65,536 chance).
        let client = TCPFallbackTests.client(policy)
        var phones: [(connection: TransportConnection, control: TransportStream, saved: ResumptionState)] = []
        for index in 0..<16 {
            let connection = try await client.connect(
                to: address, earlyMessages: [EarlyMessage([UInt8(index)], replaySafe: true)])
            let control = try #require(connection.earlyStream)
            #expect(try await withTimeout { try await control.nextMessage()?.bytes } == [UInt8(index)])
            phones.append((connection, control, try await waitForResumptionState(connection)))
        }

        let victim = try #require(workers.first { $0.value == 0 }?.key)
        kill(victim, SIGKILL)
        let restarted = try await Self.waitForWorkers(of: relay.processIdentifier, count: 2, replacing: [victim])
        #expect(restarted.values.sorted() == [0, 1], "the parent started worker 0 again")

        var survivors = 0
        var rejoined = 0
        for (index, phone) in phones.enumerated() {
            // A survivor echoes; a phone of the killed worker is reset by its successor (shared reset secret).
            // 15 s: a survivor slower than that on a loaded machine would be taken for a reset phone.
            let echoed = try? await withTimeout(.seconds(15)) { () -> Bool in
                try await phone.control.send([UInt8(index), 1])
                return try await phone.control.nextMessage()?.bytes == [UInt8(index), 1]
            }
            if echoed == true {
                survivors += 1
                continue
            }
            // QUIC: the successor's stateless reset; TCP: the kernel reset the dead worker's connections.
            let reason = try await withTimeout(.seconds(20)) { try await phone.connection.closed() }
            #expect(policy == .tcpOnly || reason.error.code == .connectionReset, "\(reason)")
            let again = try await client.connect(
                to: address, resuming: phone.saved, earlyMessages: [EarlyMessage([UInt8(index), 2], replaySafe: true)])
            #expect(again.resumption == .resumed(earlyData: .accepted), "\(again.resumptionDiagnostic ?? "")")
            #expect(try await withTimeout { try await again.earlyStream?.nextMessage()?.bytes } == [UInt8(index), 2])
            rejoined += 1
            await again.close()
        }
        #expect(survivors > 0 && rejoined > 0, "\(survivors) phones kept their worker, \(rejoined) rejoined")
        for phone in phones { await phone.connection.close() }
    }

    /// Issue 31, item 7: with `--peer-snapshot` every worker rewrote one file, so a worker restarted after a crash
    /// reset the clients the other worker had listed there (0 of 3 calls on the surviving worker finished). Each
    /// worker keeps its own file now. While worker 0 is stopped, calls are made until 3 reach worker 1 (a call the
    /// kernel hashes to the stopped worker never completes its handshake) — so worker 1 wrote last — then worker 0
    /// is killed and restarted while the 3 calls talk: all 3 finish, every message echoed.
    @Test func aRestartedWorkerResetsOnlyItsOwnClients() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-workers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let snapshot = directory.appendingPathComponent("peers").path
        let relay = try await Self.relay(redis: nil, directory: directory, ["--peer-snapshot", snapshot])
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let workers = try await Self.waitForWorkers(of: relay.processIdentifier, count: 2)
        let stopped = try #require(workers.first { $0.value == 0 }?.key)
        kill(stopped, SIGSTOP)
        var stoppedUntilKilled = true
        defer { if stoppedUntilKilled { kill(stopped, SIGCONT) } }

        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(2),
                fallback: .quicOnly))
        var calls: [HostilePeerTests.Call] = []
        for _ in 0..<40 where calls.count < 3 {
            if let call = try? await HostilePeerTests.Call(address, client: client) { calls.append(call) }
        }
        try #require(calls.count == 3, "3 calls reached the running worker")
        // Each of them in a snapshot file before the crash: the one they would be reset from, if any.
        for call in calls { try await CrashRecoveryTests.waitUntilListed(call.connection, in: directory) }

        let talking = Locked(true)
        let talks = calls.enumerated().map { index, call in
            Task { () -> (sent: Int, echoed: Int) in
                var (sent, echoed) = (0, 0)
                while talking.withLock({ $0 }) || sent < 5 {
                    let message = [UInt8(index), UInt8(truncatingIfNeeded: sent)]
                    sent += 1
                    guard (try? await call.stream.send(message)) != nil,
                        let echo = try? await withTimeout(.seconds(5), { try await call.stream.nextMessage()?.bytes })
                    else { break }
                    if echo == message { echoed += 1 }
                    try? await Task.sleep(for: .milliseconds(50))
                }
                return (sent, echoed)
            }
        }
        kill(stopped, SIGKILL)
        stoppedUntilKilled = false
        // Its successor resets its clients while it binds, before it says it listens.
        let listening = await relay.line(startingWith: "listening on", within: .seconds(20))
        #expect(listening != nil, "worker 0 was not started again")
        try await Task.sleep(for: .milliseconds(500))  // the calls keep talking past the restart
        talking.withLock { $0 = false }
        for (index, talk) in talks.enumerated() {
            let (sent, echoed) = await talk.value
            #expect(sent >= 5 && echoed == sent, "call \(index) on the surviving worker: \(echoed) of \(sent) echoed")
            #expect(calls[index].connection.status == .ready, "call \(index): \(calls[index].connection.status)")
        }
        for call in calls { await call.connection.close() }
    }

    /// SIGTERM to the parent: every worker drains (its clients are told to move) and the parent exits 0.
    @Test func sigtermDrainsEveryWorker() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-workers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let relay = try await Self.relay(redis: nil, directory: directory, ["--drain-seconds", "20"])
        defer { relay.kill() }
        let address = try #require(ServerAddress(relay.address))
        _ = try await Self.waitForWorkers(of: relay.processIdentifier, count: 2)
        try await Task.sleep(for: .milliseconds(300))
        let connection = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
        kill(relay.processIdentifier, SIGTERM)
        let notice = try await withTimeout(.seconds(10)) { try await connection.relayDraining() }
        #expect(notice != nil, "the worker holding the connection asked it to move")
        await connection.close()
        let clock = ContinuousClock()
        let start = clock.now
        while relay.isRunning && clock.now - start < .seconds(10) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!relay.isRunning && relay.terminationStatus == 0, "the parent exited 0 once the workers drained")
        #expect(Self.workers(of: relay.processIdentifier).isEmpty)
    }

    /// What a parent passes its worker reads back, a TCP-only relay's share (no UDP socket) included.
    @Test func aWorkersShareReadsBack() {
        for share in [
            InheritedSockets(udp: [3, 4], tcp: 5, firstLoop: 2, totalLoops: 4),
            InheritedSockets(udp: [], tcp: 3, firstLoop: 0, totalLoops: 2),
            InheritedSockets(udp: [3], tcp: nil, firstLoop: 1, totalLoops: 2),
            InheritedSockets(
                udp: [3], tcp: 4, firstLoop: 3, totalLoops: 4, relayWide: .init(descriptor: 5, worker: 3), ready: 6),
        ] {
            #expect(InheritedSockets(argument: share.argument) == share, "\(share.argument)")
        }
        for bad in [
            "", "udp=;first=0;total=1", "udp=3;first=1;total=1", "udp=3;tcp=x;first=0;total=1",
            "udp=3;first=0;total=1;ready=x",
        ] {
            #expect(InheritedSockets(argument: bad) == nil, "\(bad)")
        }
    }

    /// A TCP-only relay (`--no-udp`) with workers: they share the listener and serve.
    @Test func tcpOnlyWorkersServe() async throws {
        let relay = try await startChildRelay(tcpOnly: true, events: false, ["--workers", "2", "--event-loops", "1"])
        defer { relay.stopNow() }
        _ = try await Self.waitForWorkers(of: relay.processIdentifier, count: 2)
        let connection = try await TCPFallbackTests.client(.tcpOnly).connect(
            to: try #require(ServerAddress(relay.address)))
        let stream = try await connection.openStream()
        try await stream.send([1, 2, 3])
        #expect(try await withTimeout { try await stream.nextMessage()?.bytes } == [1, 2, 3])
        await connection.close()
    }

    @Test func workerCountsAndKeyedQUICLBAreRefused() async throws {
        let base = ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey]
        try await expectCLIRefuses(base + ["--workers", "1"], says: "--workers is 2 to 32")
        try await expectCLIRefuses(
            base + [
                "--workers", "2", "--quic-lb",
                "cr=0,server-id=01,nonce-len=8,key=\(String(repeating: "ab", count: 16))",
            ],
            says: "without a key")
    }
}
