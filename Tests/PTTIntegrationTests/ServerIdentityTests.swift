import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// A relay is known by its name (the TLS server name) and port, not by one address: resumption state saved
/// against one relay of a name wakes into another, and a client tries each address of the name, leaving a
/// refusing one at once and a silent one after `addressAttemptDelay`. Relays on 127.0.0.2 and 127.0.0.3 stand for
/// two hosts behind one name (`ClientConfiguration.resolve` plays the resolver), over QUIC and over TCP.
@Suite(.serialized, .integration) struct ServerIdentityTests {
    /// Two relays sharing a ticket key, one at each of `hosts`, all on one port (QUIC and TCP).
    static func fleet(_ hosts: [String], keyFile: String) async throws -> (servers: [TransportServer], port: UInt16) {
        try await StablePort.first { port in
            var servers: [TransportServer] = []
            do {
                for host in hosts {
                    var configuration = Fixtures.serverConfiguration(listen: "\(host):\(port)")
                    configuration.tcp = "\(host):\(port)"
                    configuration.ticketKeyFile = keyFile
                    configuration.earlyData = .enabled()
                    servers.append(try await TransportServer.bind(configuration: configuration))
                }
            } catch {
                for server in servers { await server.shutdown() }
                throw error
            }
            for server in servers { Task { await EchoRelay.run(server) } }
            return (servers, port)
        }
    }

    static func client(_ policy: FallbackPolicy, name: String, port: UInt16, addresses: [String]) -> TransportClient {
        var configuration = ClientConfiguration(
            serverName: name, trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(10), fallback: policy)
        configuration.resolve = [ServerAddress(host: name, port: port): addresses]
        configuration.addressAttemptDelay = .seconds(30)  // the tests that need it set a short one
        return TransportClient(configuration: configuration)
    }

    static func keyFile() throws -> (path: String, cleanup: () -> Void) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return (
            directory.appendingPathComponent("ticket.key").path, { try? FileManager.default.removeItem(at: directory) }
        )
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func stateSavedAtOneRelayOfANameResumesAtAnother(policy: FallbackPolicy) async throws {
        let key = try Self.keyFile()
        defer { key.cleanup() }
        let (servers, port) = try await Self.fleet(["127.0.0.2", "127.0.0.3"], keyFile: key.path)
        let name = ServerAddress(host: "localhost", port: port)
        let first = try await Self.client(policy, name: "localhost", port: port, addresses: ["127.0.0.2"])
            .connect(to: name, earlyMessages: [EarlyMessage([1], replaySafe: true)])
        #expect(first.remoteAddress.hasPrefix("127.0.0.2"))
        let saved = try await waitForResumptionState(first)
        #expect(saved.host == "localhost", "saved under the relay's name, not its address")
        await first.close()

        let second = try await Self.client(policy, name: "localhost", port: port, addresses: ["127.0.0.3"])
            .connect(to: name, resuming: saved, earlyMessages: [EarlyMessage([2], replaySafe: true)])
        #expect(second.remoteAddress.hasPrefix("127.0.0.3"))
        // The other relay never recorded the ticket in its own anti-replay store, so it refuses the 0-RTT (a
        // fleet-wide store lifts that), but the TLS session resumes: no full handshake.
        #expect(second.resumption == .resumed(earlyData: .rejected), "\(second.resumptionDiagnostic ?? "")")
        var replies = try #require(second.earlyStream).messages.makeAsyncIterator()
        #expect(try await replies.next()?.bytes == [2], "the early message was re-sent after the refusal")
        await second.close()

        for server in servers { await server.shutdown() }
    }

    /// Connects to localhost at a relay on 127.0.0.3, trying 127.0.0.4 first (`silent`: it takes everything and
    /// answers nothing; otherwise nothing listens there, so it refuses), and expects the relay well within the
    /// 10 s handshake timeout.
    func connectPast127004(_ policy: FallbackPolicy, silent: Bool, attemptDelay: Duration) async throws {
        let key = try Self.keyFile()
        defer { key.cleanup() }
        let (servers, port) = try await Self.fleet(["127.0.0.3"], keyFile: key.path)
        let hang = silent ? try SilentAddress(host: "127.0.0.4", port: port) : nil
        defer { hang?.close() }
        var configuration = Self.client(policy, name: "localhost", port: port, addresses: ["127.0.0.4", "127.0.0.3"])
            .configuration
        configuration.addressAttemptDelay = attemptDelay
        let clock = ContinuousClock()
        let start = clock.now
        let connection = try await TransportClient(configuration: configuration)
            .connect(to: ServerAddress(host: "localhost", port: port))
        // Waiting for 127.0.0.4's handshake timeout would take 10 s: less proves it was not waited for, however
        // slow a loaded machine makes the connection to 127.0.0.3.
        #expect(clock.now - start < .seconds(10), "did not wait for 127.0.0.4's handshake timeout")
        #expect(connection.remoteAddress.hasPrefix("127.0.0.3"))
        await connection.close()
        for server in servers { await server.shutdown() }
    }

    /// UDP gets an ICMP port unreachable, TCP a reset. The attempt delay is 30 s, so only the refusal can move the
    /// client on in time.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aRefusingAddressIsLeftAtOnce(policy: FallbackPolicy) async throws {
        try await connectPast127004(policy, silent: false, attemptDelay: .seconds(30))
    }

    /// A host that hangs: the next address starts beside it after the attempt delay.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aSilentAddressIsLeftAfterTheAttemptDelay(policy: FallbackPolicy) async throws {
        try await connectPast127004(policy, silent: true, attemptDelay: .milliseconds(200))
    }

    @Test func aWrongCertificateAtOneAddressIsNotSkipped() async throws {
        let key = try Self.keyFile()
        defer { key.cleanup() }
        let (servers, port) = try await Self.fleet(["127.0.0.3"], keyFile: key.path)
        var impostor = Fixtures.serverConfiguration(
            listen: "127.0.0.2:\(port)", cert: Fixtures.untrustedCert, key: Fixtures.untrustedKey)
        impostor.tcp = "127.0.0.2:\(port)"
        let fake = try await TransportServer.bind(configuration: impostor)
        let client = Self.client(.race(), name: "localhost", port: port, addresses: ["127.0.0.2", "127.0.0.3"])
        await #expect {
            _ = try await client.connect(to: ServerAddress(host: "localhost", port: port))
        } throws: { error in
            (error as? TransportError)?.code == .certificateUntrusted
        }
        await fake.shutdown()
        for server in servers { await server.shutdown() }
    }

    /// The CLI: `connect NAME:PORT --resolve NAME:PORT:ADDR,…` against two relay processes sharing a ticket key;
    /// the session file written against one wakes into the other.
    @Test func connectResolveWakesIntoAnotherRelayOfTheName() async throws {
        let key = try Self.keyFile()
        defer { key.cleanup() }
        let session = key.path + ".session"
        let (relays, port) = try await StablePort.first { port -> ([ChildServer], UInt16) in
            var relays: [ChildServer] = []
            do {
                for host in ["127.0.0.2", "127.0.0.3"] {
                    relays.append(
                        try await ChildServer.start(
                            Subprocess.cli,
                            [
                                "serve", "--listen", "\(host):\(port)", "--cert", Fixtures.serverCert, "--key",
                                Fixtures.serverKey, "--ticket-key", key.path,
                            ]))
                }
            } catch {
                for relay in relays { relay.kill() }
                throw error
            }
            return (relays, port)
        }
        defer { for relay in relays { relay.kill() } }
        func connect(_ addresses: String) async throws -> [String: Any] {
            let result = try await runProgram(
                Subprocess.cli,
                [
                    "connect", "localhost:\(port)", "--resolve", "localhost:\(port):\(addresses)", "--ca", Fixtures.ca,
                    "--session-file", session, "--json",
                ])
            #expect(result.status == 0, "\(result.stderr)")
            return jsonObject(result.stdout) ?? [:]
        }
        let cold = try await connect("127.0.0.4,127.0.0.2")  // nothing on .4: refused, then .2
        #expect(cold["resumed"] as? Bool == false)
        let warm = try await connect("127.0.0.3")
        #expect(warm["resumed"] as? Bool == true, "the state saved against .2 resumed at .3")

        let bad = try await runProgram(
            Subprocess.cli, ["connect", "localhost:\(port)", "--resolve", "localhost:4433", "--ca", Fixtures.ca])
        #expect(bad.status == 1 && bad.stderr.contains("NAME:PORT:ADDR"), "\(bad.stderr)")
    }

    @Test func aResolveEntryThatIsNotAnAddressIsAConfigurationError() async throws {
        let client = Self.client(.quicOnly, name: "localhost", port: 4433, addresses: ["relay.example"])
        await #expect {
            _ = try await client.connect(to: ServerAddress(host: "localhost", port: 4433))
        } throws: { error in
            (error as? TransportError)?.code == .invalidConfiguration
        }
    }
}

/// A UDP socket and a TCP listener on one address and port that take everything and answer nothing.
final class SilentAddress {
    private var descriptors: [Int32] = []

    init(host: String, port: UInt16) throws {
        for type in [SOCK_DGRAM, SOCK_STREAM] {
            let fd = socket(AF_INET, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw TransportError(.systemCallFailed, "socket: errno \(errno)") }
            descriptors.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, type == SOCK_DGRAM || listen(fd, 16) == 0 else {
                close()
                throw TransportError(.systemCallFailed, "binding a silent \(host):\(port): errno \(errno)")
            }
        }
    }

    func close() {
        for fd in descriptors { Glibc.close(fd) }
        descriptors = []
    }
}
