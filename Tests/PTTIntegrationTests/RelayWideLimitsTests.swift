import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing

/// Issue 31, item 10: `serve --workers N` is one relay to its limits. Each worker was a relay of its own —
/// `--max-connections 5` accepted 10 with 2 workers, one address held 128 silent TCP connections against the
/// documented 64, each worker had its own 0-RTT budget. Now the supervisor shares memory with its workers
/// (`RelayWideState`), and a worker killed with SIGKILL gives its connections' places back.
@Suite("Limits per relay under --workers", .serialized, .integration)
struct RelayWideLimitsTests {
    /// A relay of 2 workers (one loop each) with `more` arguments, its address, and a scratch directory for keys.
    static func relay(
        _ more: [String], redis: RedisTestServer? = nil
    ) async throws -> (ChildServer, ServerAddress, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ptt-relay-wide-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let relay = try await WorkerProcessTests.relay(redis: redis, directory: directory, more)
        _ = try await WorkerProcessTests.waitForWorkers(of: relay.processIdentifier, count: 2)
        return (relay, try #require(ServerAddress(relay.address)), directory)
    }

    /// Tries `count` connections one after another; returns those the relay accepted (the others were refused).
    static func connect(
        _ count: Int, _ client: TransportClient, to address: ServerAddress
    ) async -> [TransportConnection] {
        var accepted: [TransportConnection] = []
        for _ in 0..<count {
            guard let connection = try? await client.connect(to: address) else { continue }
            // Over TCP a refused connection may complete the TCP handshake first: an echo proves it was served.
            guard (try? await withTimeout(.seconds(5), { try await Self.echoes(connection) })) == true else {
                await connection.close()
                continue
            }
            accepted.append(connection)
        }
        return accepted
    }

    static func echoes(_ connection: TransportConnection) async throws -> Bool {
        let stream = try await connection.openStream()
        try await stream.send([7])
        return try await stream.nextMessage()?.bytes == [7]
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func maxConnectionsHoldForTheRelayAndAKilledWorkersPlacesComeBack(policy: FallbackPolicy) async throws {
        let (relay, address, directory) = try await Self.relay(["--max-connections", "5"])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let client = TCPFallbackTests.client(policy)
        let first = await Self.connect(8, client, to: address)
        #expect(first.count == 5, "--max-connections 5 with 2 workers accepts 5, not 5 per worker")

        // Both workers die (one after the other, each started again): every place comes back, whichever held it.
        for slot in [0, 1] {
            let workers = WorkerProcessTests.workers(of: relay.processIdentifier)
            let victim = try #require(workers.first { $0.value == slot }?.key)
            kill(victim, SIGKILL)
            _ = try await WorkerProcessTests.waitForWorkers(of: relay.processIdentifier, count: 2, replacing: [victim])
        }
        for connection in first { await connection.close() }
        let second = await Self.connect(8, client, to: address)
        #expect(second.count == 5, "the killed workers' places came back: \(second.count) of 5")
        for connection in second { await connection.close() }
    }

    /// QUIC: with Retry on every connection, all of one address's connections are validated and charged to one
    /// account, whose budget (`--max-connections-per-source`) is the relay's.
    @Test func aSourcesQUICBudgetHoldsOverWorkers() async throws {
        let (relay, address, directory) = try await Self.relay([
            "--retry", "--max-connections-per-source", "64", "--max-connections", "1000",
        ])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let connections = await Self.connect(70, TCPFallbackTests.client(.quicOnly), to: address)
        #expect(connections.count == 64, "64 per source for the relay, not per worker (was 70 of 70, up to 128)")
        for connection in connections { await connection.close() }
    }

    /// TCP: silent connections (no TLS) from one address hold pending-handshake places: 64 per source, documented
    /// for the relay (`maxPendingTCPHandshakesPerSource`); the rest are reset at accept, whichever worker accepts.
    @Test func aSourcesPendingTCPHandshakesHoldOverWorkers() async throws {
        let (relay, address, directory) = try await Self.relay([])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let attacker = SilentTCP()
        #expect(attacker.open(100, port: address.port, from: "127.0.0.3") == 100)
        let closed = await attacker.waitForClosed(within: .seconds(5)) { $0.count >= 36 }
        #expect(closed.count == 36, "100 silent connections: 64 pending for the relay, 36 reset (was 0 of 100)")
        // Another address is not affected, and the held ones stay held (the handshake deadline is 10 s).
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        #expect(attacker.closedByServer.count == 36)
        withExtendedLifetime(attacker) {}
    }

    /// The 0-RTT budget with the fleet's Redis store: 20 wakes, each with a ticket of its own, against a budget of
    /// 10 for the relay: 10 carry 0-RTT, whichever worker each lands on (was up to 10 per worker).
    @Test func theZeroRTTBudgetSpansWorkers() async throws {
        let redis = try await RedisTestServer.start()
        let (relay, address, directory) = try await Self.relay(
            ["--zero-rtt-tickets", "10", "--no-source-limits"], redis: redis)
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        // Past the second in which a worker wrote Redis' memory marker (tickets from that second wake in 1-RTT).
        try await Task.sleep(for: .milliseconds(1200))
        let client = TCPFallbackTests.client(.quicOnly)
        var tickets: [ResumptionState] = []
        for _ in 0..<20 { tickets.append(try await ZeroRTTBudgetTests.ticket(client, address)) }
        var outcomes: [ResumptionStatus] = []
        for ticket in tickets { outcomes.append(try await ZeroRTTBudgetTests.wake(client, address, ticket)) }
        #expect(outcomes.allSatisfy { $0 != .none }, "every wake resumed: \(outcomes)")
        let accepted = outcomes.filter { $0 == .resumed(earlyData: .accepted) }.count
        #expect(accepted == 10, "a budget of 10 for the relay: \(accepted) wakes carried 0-RTT")
    }

    /// Each worker maps the supervisor's memory and keeps no descriptor of it (a worker's children inherit none).
    @Test func eachWorkerMapsTheSharedMemoryAndHoldsNoDescriptorOfIt() async throws {
        let (relay, _, directory) = try await Self.relay([])
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let name = "memfd:ptt-relay-shared"
        for worker in WorkerProcessTests.workers(of: relay.processIdentifier).keys {
            // A worker maps it while it binds: wait for that (bounded) rather than read too early.
            let mapped = try? await withTimeout(.seconds(10)) { () -> Bool in
                while true {
                    let maps = (try? String(contentsOfFile: "/proc/\(worker)/maps", encoding: .utf8)) ?? ""
                    if maps.contains(name) { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(mapped == true, "worker \(worker) maps the relay-wide memory")
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(worker)/fd")) ?? []
            let targets = descriptors.compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/fd/\($0)")
            }
            #expect(!targets.contains { $0.contains(name) }, "\(targets)")
        }
    }

    /// What a supervisor passes its worker about the shared memory reads back; anything else is refused.
    @Test func aWorkersWayIntoTheSharedMemoryReadsBackAndGarbageIsRefused() {
        let share = InheritedSockets(
            udp: [3], tcp: 4, firstLoop: 1, totalLoops: 2, relayWide: .init(descriptor: 5, worker: 1))
        #expect(InheritedSockets(argument: share.argument) == share, "\(share.argument)")
        for bad in [
            "udp=3;first=0;total=2;state=5", "udp=3;first=0;total=2;worker=1", "udp=3;first=0;total=2;state=x;worker=1",
            "udp=3;first=0;total=2;state=5;worker=-1", "udp=3;first=0;total=2;state=-5;worker=0",
            "udp=3;first=0;total=2;state=;worker=",
        ] {
            #expect(InheritedSockets(argument: bad) == nil, "\(bad)")
        }
    }

    @Test(arguments: [
        (["0"], "--max-connections-per-source must be at least 1"),
        (["x"], "--max-connections-per-source takes a non-negative whole number, not x"),
        (["-2"], "--max-connections-per-source takes a non-negative whole number, not -2"),
        (["10", "--no-source-limits"], "without --no-source-limits"),
    ])
    func badPerSourceLimitsAreClearErrors(values: [String], says: String) async throws {
        try await expectCLIRefuses(
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--max-connections-per-source",
            ] + values, says: says)
    }
}
