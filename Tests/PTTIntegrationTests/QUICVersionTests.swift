import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// QUIC v2 (RFC 9369) where the linked ngtcp2 speaks it (1.x), and a typed error where it does not (0.12.1): our
/// client and relay in process, the CLI against a relay in a child process, and aioquic as an independent v2 client.
@Suite("QUIC v2", .integration)
struct QUICVersionTests {
    static func client(_ version: QUICVersion) -> TransportClient {
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        configuration.quicVersion = version
        return TransportClient(configuration: configuration)
    }

    @Test func aClientSpeaksTheVersionItStartsInOrGetsATypedError() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        guard LinkedLibraries.supportsQUICVersion2 else {
            let error = await #expect(throws: TransportError.self) {
                _ = try await Self.client(.version2).connect(to: address)
            }
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.message.contains("QUIC v2 (RFC 9369) needs ngtcp2 1.0 or later") == true, "\(error!)")
            await server.shutdown()
            return
        }
        for version in [QUICVersion.version2, .version1] {  // one relay serves both
            try await withTimeout {
                let connection = try await Self.client(version).connect(to: address)
                let stream = try await connection.openStream()
                try await stream.send(Array("v\(version)".utf8))
                #expect(try await stream.nextMessage()?.bytes == Array("v\(version)".utf8))
                let frame: [UInt8] = [7, version == .version2 ? 2 : 1]
                try connection.sendDatagram(frame)
                for await datagram in connection.datagrams {
                    #expect(datagram.payload == frame)
                    break
                }
                #expect(await connection.statistics().quicVersion == version)
                await connection.close()
            }
        }
        await server.shutdown()
    }

    @Test func connectSpeaksV2ToARelayInAChildProcess() async throws {
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let result = try await runProgram(
            Subprocess.cli,
            [
                "connect", relay.address, "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic",
                "--quic-version", "2", "--datagrams", "3", "--json",
            ], timeout: 20)
        guard LinkedLibraries.supportsQUICVersion2 else {
            #expect(result.status == 1 && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.contains("QUIC v2 (RFC 9369) needs ngtcp2 1.0 or later"), "\(result.stderr)")
            return
        }
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(jsonObject(result.stdout), "\(result.stdout)")
        #expect(json["quic_version"] as? Int == 2)
        // The CLI's audio expires after 100 ms unsent, as audio should, and a loaded machine may starve the loop that
        // long: one echo proves datagrams flow in the call; all of them is a quiet machine's figure.
        #expect((1...3).contains(json["datagrams_echoed"] as? Int ?? 0), "\(json)")
        let (status, _) = await relay.stop()
        #expect(status == 0)
    }

    @Test func aBadVersionIsAClearError() async throws {
        try await expectCLIRefuses(
            ["connect", "127.0.0.1:9", "--ca", Fixtures.ca, "--quic-version", "3"], says: "--quic-version 3: use 1 or 2"
        )
    }

    @Test(.enabled(if: peersEnabled)) func aioquicSpeaksV2ToOurRelay() async throws {
        guard LinkedLibraries.supportsQUICVersion2 else { return }  // 0.12.1: covered by the typed error above
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let json = try await AioquicInteropTests.runClient(
            port: address.port, ["--messages", "5", "--datagrams", "20", "--quic-version", "2"])
        #expect(json["quic_version"] as? Int == 2)
        #expect(json["messages_echoed"] as? Int == 5)
        #expect((json["datagrams_echoed"] as? Int ?? 0) >= 18)
        await server.shutdown()
    }

    @Test(.enabled(if: peersEnabled)) func ourV2ClientToAnAioquicServer() async throws {
        guard LinkedLibraries.supportsQUICVersion2 else { return }
        let peer = try await ChildServer.start(
            try AioquicInteropTests.python,
            [
                "\(AioquicInteropTests.peers)/aioquic_echo_server.py", "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            ])
        defer { peer.stopNow() }
        let address = try #require(ServerAddress(peer.address))
        try await withTimeout {
            let connection = try await Self.client(.version2).connect(to: address)
            let stream = try await connection.openStream()
            try await stream.send(Array("v2 to aioquic".utf8))
            #expect(try await stream.nextMessage()?.bytes == Array("v2 to aioquic".utf8))
            #expect(await connection.statistics().quicVersion == .version2)
            await connection.close()
        }
    }
}
