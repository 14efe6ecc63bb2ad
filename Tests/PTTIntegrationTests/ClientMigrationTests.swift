import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import TestSupport
import Testing

@testable import PTTTransport

/// A phone moves networks mid-call: `TransportConnection.migrate(to:)` moves the client from 127.0.0.1 to
/// 127.0.0.2 (Linux routes all of 127/8 on lo) while audio and control messages flow, against our relay and
/// against aioquic's server, without a new handshake; misuse gets typed errors and the call stays up.
@Suite("Client migration: the phone moves, the call stays", .serialized, .enabled(if: peersEnabled), .integration)
struct ClientMigrationTests {
    /// Datagrams that must come back of 300: 90 %; 75 % in a sanitized build, whose 5–10× slower relay validates the
    /// new path later while audio keeps coming.
    static let minimumEchoed = sanitizedBuild ? 225 : 270
    static let newAddress = LocalEndpoint(host: "127.0.0.2")

    struct Call {
        var echoed = 0
        var controlEchoed: [String] = []
        var controlSent: [String] = []
        var oldLocal = ""
        var newLocal = ""
        var statistics = ConnectionStatistics()
    }

    /// 300 datagrams 20 ms apart with a control message every 10th; `migrate(to:)` starts after the 100th.
    static func call(_ connection: TransportConnection) async throws -> Call {
        var call = Call()
        call.oldLocal = await connection.statistics().localAddress
        let stream = try await connection.openStream()
        let echoes = Task {
            var count = 0
            for await _ in connection.datagrams {
                count += 1
                if count == 300 { break }
            }
            return count
        }
        let control = Task {
            var received: [String] = []
            for try await message in stream.messages {
                received.append(String(decoding: message.bytes, as: UTF8.self))
                if received.count == 30 { break }
            }
            return received
        }
        var migration: Task<String, any Error>?
        for index in 0..<300 {
            try connection.sendDatagram(Array("audio \(index)".utf8) + [UInt8](repeating: 0, count: 80))
            if index % 10 == 0 {
                let message = "control \(index / 10)"
                call.controlSent.append(message)
                try await stream.send(Array(message.utf8))
            }
            if index == 100 {
                migration = Task { try await connection.migrate(to: newAddress, waitingUpTo: .seconds(2)) }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        call.newLocal = try await migration!.value
        try await Task.sleep(for: .milliseconds(500))  // the last echoes
        echoes.cancel()
        call.echoed = await echoes.value
        call.controlEchoed = try await withTimeout(.seconds(20)) { try await control.value }
        call.statistics = await connection.statistics()
        return call
    }

    /// Whether a UDP socket can bind `address` now, retrying for a second (the old path is read for one PTO
    /// after the move, then closed).
    static func becomesFree(_ address: String) async throws -> Bool {
        let colon = try #require(address.lastIndex(of: ":"))
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = try #require(UInt16(address[address.index(after: colon)...])).bigEndian
        inet_pton(AF_INET, String(address[..<colon]), &sin.sin_addr)
        for _ in 0..<100 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            let rv = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if rv == 0 { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    static func expectCallSurvived(_ call: Call) async throws {
        #expect(call.echoed >= minimumEchoed, "\(call.echoed) of 300 echoed")
        #expect(call.controlEchoed == call.controlSent)
        #expect(call.newLocal.hasPrefix("127.0.0.2:"), "\(call.newLocal)")
        #expect(call.statistics.localAddress == call.newLocal)
        #expect(call.statistics.migrations == 1)
        #expect(call.oldLocal.hasPrefix("127.0.0.1:"), "\(call.oldLocal)")
        #expect(try await becomesFree(call.oldLocal), "the old socket \(call.oldLocal) is still open")
    }

    @Test func toOurRelay() async throws {
        let events = EventLog()
        let server = try await TransportServer.bind(configuration: Fixtures.serverConfiguration())
        let relay = Task { await EchoRelay.run(server) { events.append($0) } }
        defer { relay.cancel() }
        let address = try #require(server.quicAddress)
        let connection = try await Fixtures.client().connect(to: address)
        let call = try await withTimeout(.seconds(30)) { try await Self.call(connection) }
        try await Self.expectCallSurvived(call)
        let handshakes = events.all().filter { if case .handshakeCompleted = $0 { true } else { false } }
        #expect(handshakes.count == 1, "the relay saw \(handshakes.count) handshakes")
        let moves = events.all().compactMap { if case .pathChanged(_, let to) = $0 { to } else { nil } }
        #expect(moves == [call.newLocal], "the relay's published remote address: \(moves)")
        await connection.close()
        await server.shutdown()
    }

    @Test func toAioquicServer() async throws {
        let peer = try await ChildServer.start(
            try AioquicInteropTests.python,
            [
                "\(AioquicInteropTests.peers)/aioquic_echo_server.py", "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey, "--count-handshakes",
            ])
        defer { peer.stopNow() }
        let connection = try await Fixtures.client().connect(to: try #require(ServerAddress(peer.address)))
        let call = try await withTimeout(.seconds(30)) { try await Self.call(connection) }
        try await Self.expectCallSurvived(call)
        await connection.close()
        let output = await peer.stop().output
        #expect(output.contains("handshakes 1\n") || output.hasSuffix("handshakes 1"), "\(output)")
    }

    @Test func misuseGetsTypedErrorsAndTheCallStaysUp() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        func stillUp(_ text: String) async throws {
            let stream = try await connection.openStream()
            try await stream.send(Array(text.utf8))
            let echo = try await withTimeout(.seconds(20)) {
                var messages = stream.messages.makeAsyncIterator()
                return try await messages.next()?.bytes
            }
            #expect(echo == Array(text.utf8))
        }
        // An address no interface has: the bind fails, the connection stays on its path.
        await #expect {
            try await connection.migrate(to: LocalEndpoint(host: "192.0.2.1"), waitingUpTo: .seconds(2))
        } throws: { ($0 as? TransportError)?.code == .systemCallFailed }
        // Not a numeric address.
        await #expect {
            try await connection.migrate(to: LocalEndpoint(host: "wifi0"))
        } throws: { ($0 as? TransportError)?.code == .invalidConfiguration }
        // Another address family than the server's.
        await #expect {
            try await connection.migrate(to: LocalEndpoint(host: "::1"))
        } throws: { ($0 as? TransportError)?.code == .migrationUnsupported }
        try await stillUp("after the refusals")
        // Two at once: one moves, the other is told a migration is under way.
        @Sendable func attempt(_ host: String) async -> String {
            do {
                return "moved to " + (try await connection.migrate(to: LocalEndpoint(host: host)))
            } catch {
                return (error as? TransportError)?.code.name ?? "\(error)"
            }
        }
        // Both requests reach the client's loop in one turn: it is held busy while they queue (otherwise the first
        // could finish, a round trip on loopback, before a slow scheduler even starts the second).
        let holding = PolledLog(false)
        connection.backend.loop.execute {
            holding.update { $0 = true }
            usleep(500_000)
        }
        #expect(await holding.waitFor { $0 })
        async let first = attempt("127.0.0.2")
        async let second = attempt("127.0.0.3")
        let results = await [first, second]
        #expect(results.filter { $0.hasPrefix("moved to 127.0.0.") }.count == 1, "\(results)")
        #expect(results.filter { $0 == TransportError.Code.migrationNotReady.name }.count == 1, "\(results)")
        #expect(await connection.statistics().migrations == 1)
        try await stillUp("after two at once")
        #expect(connection.status == .ready)
        await connection.close()
        await server.shutdown()
    }

    @Test func overTCPItFailsWithATypedError() async throws {
        let (server, address, relay, client) = try await Fixtures.tcpEchoServer()
        defer { relay.cancel() }
        let connection = try await client.connect(to: address)
        #expect(connection.path == .tcp)
        await #expect {
            try await connection.migrate(to: LocalEndpoint(host: "127.0.0.2"))
        } throws: { ($0 as? TransportError)?.code == .migrationUnsupported }
        #expect(connection.status == .ready)
        await connection.close()
        await server.shutdown()
    }

    @Test func theCLIMigratesAndListsThePaths() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let common = [
            "connect", "\(address)", "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic", "--json",
        ]
        let result = try await runProgram(
            Subprocess.cli, common + ["--datagrams", "300", "--migrate-after", "100", "--migrate-to", "127.0.0.2"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(jsonObject(result.stdout), "\(result.stdout)")
        let paths = json["paths"] as? [String] ?? []
        #expect(paths.count == 2 && paths[0].hasPrefix("127.0.0.1:") && paths[1].hasPrefix("127.0.0.2:"), "\(json)")
        #expect(json["migrated"] as? Bool == true)
        #expect((json["datagrams_echoed"] as? Int ?? 0) >= Self.minimumEchoed, "\(json)")
        // Usage errors: one line, exit 1.
        for bad in [
            ["--datagrams", "10", "--migrate-after", "20", "--migrate-to", "127.0.0.2"],
            ["--datagrams", "10", "--migrate-after", "5"],
            ["--datagrams", "10", "--migrate-to", "wifi0"],
        ] {
            let refused = try await runProgram(Subprocess.cli, common + bad)
            #expect(refused.status == 1, "\(bad): \(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(bad): \(refused.stderr)")
        }
        await server.shutdown()
    }

    @Test(arguments: [1, 2])
    func aNATRebindingDuringTheHandshake(afterPackets: Int) async throws {
        // The phone's NAT moves it after its first one or two packets, before the handshake completed (a server
        // must not follow a client to a new address then, RFC 9000 §9): the connection completes or fails with a
        // clear error, nothing crashes, and the relay serves the next client. When the NAT moved the client's
        // Finished, the client believes the handshake done but the server never confirms it; the short idle
        // timeout ends that wait.
        let server = try await TransportServer.bind(configuration: Fixtures.serverConfiguration())
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let serverAddress = try #require(server.quicAddress)
        let nat = try await ChildServer.start(
            try AioquicInteropTests.python,
            [NATRebindingTests.nat, "\(serverAddress.port)", "--rebind-after", "\(afterPackets)"])
        defer { nat.stopNow() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), idleTimeout: .seconds(3),
                handshakeTimeout: .seconds(2), fallback: .quicOnly))
        do {
            let connection = try await client.connect(to: try #require(ServerAddress(nat.address)))
            let stream = try await connection.openStream()
            try await stream.send(Array("through the NAT".utf8))
            var messages = stream.messages.makeAsyncIterator()
            #expect(try await messages.next()?.bytes == Array("through the NAT".utf8))
            await connection.close()
        } catch let error as TransportError {
            #expect([.handshakeTimeout, .idleTimeout].contains(error.code), "\(error)")
        }
        let next = try await Fixtures.client().connect(to: serverAddress)
        #expect(next.status == .ready)
        await next.close()
        await server.shutdown()
    }
}
