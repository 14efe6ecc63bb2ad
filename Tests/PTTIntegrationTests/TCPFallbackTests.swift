import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// The TCP fallback end to end over real sockets: the same bodies over QUIC and QMux, racing when UDP is
/// unreachable or silently dropped, and interop with the independent Python QMux peer.
@Suite("TCP fallback (QMux over TLS) end to end", .integration)
struct TCPFallbackTests {
    /// An echo relay on QUIC and TCP, same port number.
    static func dualServer(
        tcpOnly: Bool = false, events: (@Sendable (RelayEvent) -> Void)? = nil
    ) async throws
        -> (TransportServer, ServerAddress, Task<Void, Never>)
    {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        if tcpOnly { configuration.quic = nil }
        var server = try await TransportServer.bind(configuration: configuration)
        // TCP only: the tests send QUIC to the same port number over UDP and expect nothing there (port unreachable,
        // or a socket of their own). Another test's relay may hold that UDP port: take a TCP port whose UDP twin is
        // free (the kernel hands out UDP ports at random, so a second try almost always finds one).
        for _ in 0..<20 where tcpOnly && !udpPortIsFree(server.tcpAddress!.port) {
            await server.shutdown()
            server = try await TransportServer.bind(configuration: configuration)
        }
        let relay = Task { [server] in await EchoRelay.run(server, events: events) }
        return (server, (server.quicAddress ?? server.tcpAddress)!, relay)
    }

    /// Whether no socket holds UDP `port` on 127.0.0.1 now (a bind there succeeds; the probe closes at once).
    static func udpPortIsFree(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    static func client(_ fallback: FallbackPolicy, serverName: String = "localhost") -> TransportClient {
        TransportClient(
            configuration: ClientConfiguration(
                serverName: serverName, trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5), fallback: fallback))
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func messagesDatagramsAndCloseCodesOnBothPaths(policy: FallbackPolicy) async throws {
        let (closes, closeSink) = AsyncStream.makeStream(of: CloseReason.self)
        let (server, address, relay) = try await Self.dualServer { event in
            if case .closed(_, let reason) = event { closeSink.yield(reason) }
        }
        defer { relay.cancel() }
        let serverSide = Task { () -> CloseReason? in
            var iterator = closes.makeAsyncIterator()
            return await iterator.next()
        }
        try await withTimeout(.seconds(60)) {
            let connection = try await Self.client(policy).connect(to: address)
            #expect(connection.path == (policy == .tcpOnly ? .tcp : .quic))
            let stream = try await connection.openStream()
            let sent = (0..<50).map { Array("message \($0)".utf8) } + [[UInt8](repeating: 7, count: 60_000)]
            for message in sent { try await stream.send(message) }
            try await stream.finish()
            var received: [[UInt8]] = []
            for try await message in stream.messages { received.append(message.bytes) }
            #expect(received == sent)

            var echoed = 0
            let datagrams = Task {
                var count = 0
                for await _ in connection.datagrams {
                    count += 1
                    if count == 100 { break }
                }
                return count
            }
            for index in 0..<100 {
                try connection.sendDatagram([UInt8(index)] + [UInt8](repeating: 1, count: 79))
                try await Task.sleep(for: .milliseconds(1))
            }
            echoed = await firstValue(within: .seconds(20), datagrams) ?? 0
            #expect(echoed >= 95)
            #expect(throws: TransportError.self) { try connection.sendDatagram([]) }
            #expect(throws: TransportError.self) {
                try connection.sendDatagram([UInt8](repeating: 0, count: connection.maxDatagramPayloadSize + 1))
            }
            await connection.close(code: 42, reason: "done")
        }
        let reason = await firstValue(within: .seconds(20), serverSide)
        #expect(reason == .peer(code: 42, reason: "done"))
        await server.shutdown()
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly, .race()])
    func wrongNameIsFinalOnEveryPath(policy: FallbackPolicy) async throws {
        let (server, address, relay) = try await Self.dualServer()
        defer { relay.cancel() }
        await #expect { _ = try await Self.client(policy, serverName: "relay.invalid").connect(to: address) } throws: {
            ($0 as? TransportError)?.code == .certificateNameMismatch
        }
        await server.shutdown()
    }

    @Test func udpPortUnreachableRacesToTCPAndRemembersIt() async throws {
        let (server, address, relay) = try await Self.dualServer(tcpOnly: true)
        defer { relay.cancel() }
        let client = Self.client(.race())
        let first = try await withTimeout { try await client.connect(to: address) }
        #expect(first.path == .tcp)
        _ = await eventually(within: .seconds(20)) { first.resumptionState != nil }
        let state = try #require(first.resumptionState)
        #expect(state.lastPath == .tcp)
        await first.close()
        let second = try await withTimeout { try await client.connect(to: address, resuming: state) }
        #expect(second.path == .tcp)
        #expect(second.resumption == .resumed(earlyData: .notAttempted))
        await second.close()
        await server.shutdown()
    }

    @Test(.integrationAlone) func udpSilentlyDroppedRacesToTCPWithoutLeakingDescriptors() async throws {
        let (server, address, relay) = try await Self.dualServer(tcpOnly: true)
        defer { relay.cancel() }
        // A UDP socket on the same port that never reads: QUIC's packets vanish without ICMP.
        let blackHole = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(blackHole) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = address.port.bigEndian
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(blackHole, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0)
        let client = Self.client(.race(tcpAfter: .milliseconds(100)))
        let warm = try await withTimeout { try await client.connect(to: address) }  // the client loop's own fds
        await warm.close()
        try await Task.sleep(for: .milliseconds(100))
        let baseline = Self.openDescriptors()
        for _ in 0..<5 {
            let connection = try await withTimeout { try await client.connect(to: address) }
            #expect(connection.path == .tcp)
            await connection.close()
        }
        var now = Self.openDescriptors()
        for _ in 0..<100 where now > baseline {
            try await Task.sleep(for: .milliseconds(20))
            now = Self.openDescriptors()
        }
        #expect(now <= baseline, "the losing QUIC attempts closed their sockets")
        await server.shutdown()
    }

    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    @Test func ourClientTalksToThePythonQMuxPeer() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            if ProcessInfo.processInfo.environment["PTT_REQUIRE_PEERS"] != nil { Issue.record("python3 missing") }
            return
        }
        let peer = try await ChildServer.start(
            "/usr/bin/python3",
            [
                "\(Fixtures.root)/Tests/Peers/qmux_peer.py", "server", "--cert", Fixtures.serverCert,
                "--key", Fixtures.serverKey, "--port", "0",
            ])
        defer { peer.stopNow() }
        let address = try #require(ServerAddress(peer.address))
        try await withTimeout {
            let connection = try await Self.client(.tcpOnly).connect(to: address)
            #expect(connection.path == .tcp)
            let stream = try await connection.openStream()
            let sent = (0..<10).map { Array("to python \($0)".utf8) }
            for message in sent { try await stream.send(message) }
            try await stream.finish()
            var received: [[UInt8]] = []
            for try await message in stream.messages { received.append(message.bytes) }
            #expect(received == sent)
            try connection.sendDatagram(Array("audio".utf8))
            var datagrams = connection.datagrams.makeAsyncIterator()
            #expect(await datagrams.next()?.payload == Array("audio".utf8))
            await connection.close()
        }
    }

    @Test func thePythonQMuxClientTalksToOurServer() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        let (server, address, relay) = try await Self.dualServer(tcpOnly: true)
        defer { relay.cancel() }
        let result = try await runProgram(
            "/usr/bin/python3",
            [
                "\(Fixtures.root)/Tests/Peers/qmux_peer.py", "client", "--ca", Fixtures.ca, "--server-name",
                "localhost",
                "--port", "\(address.port)", "--streams", "3", "--messages", "5", "--datagrams", "5",
            ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        await server.shutdown()
    }
}

/// The task's value, or nil if it does not finish within `limit` (the task is then cancelled).
func firstValue<T: Sendable>(within limit: Duration, _ task: Task<T, Never>) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await task.value }
        group.addTask {
            try? await Task.sleep(for: limit)
            task.cancel()
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
