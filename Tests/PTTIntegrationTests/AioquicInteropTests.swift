import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// The Python interpreter with aioquic installed (`.ci/run` makes `.venv-peers`), or nil.
let peerPython: String? = {
    if let path = ProcessInfo.processInfo.environment["PTT_PEER_PYTHON"] { return path }
    let path = "\(Fixtures.root)/.venv-peers/bin/python"
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}()

/// CI sets PTT_REQUIRE_PEERS=1: interop tests then fail instead of being skipped when the peer is missing.
let peersRequired = ProcessInfo.processInfo.environment["PTT_REQUIRE_PEERS"] == "1"
let peersEnabled = peerPython != nil || peersRequired

@Suite(
    "Interop with aioquic, an independent QUIC implementation", .serialized, .enabled(if: peersEnabled), .integration)
struct AioquicInteropTests {
    static var python: String {
        get throws {
            guard let peerPython else {
                throw TransportError(.invalidConfiguration, "aioquic is not installed: run bash .ci/run once")
            }
            return peerPython
        }
    }
    static let peers = "\(Fixtures.root)/Tests/Peers"

    /// Runs `aioquic_client.py` against a server on 127.0.0.1 and returns the JSON it printed.
    static func runClient(port: UInt16, _ arguments: [String]) async throws -> [String: Any] {
        let result = try await runProgram(
            try python, ["\(peers)/aioquic_client.py", "127.0.0.1", "\(port)", "--ca", Fixtures.ca] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(jsonObject(result.stdout), "\(result.stdout)")
    }

    @Test func aioquicClientToOurServer() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let json = try await Self.runClient(
            port: address.port, ["--messages", "20", "--streams", "3", "--datagrams", "100"])
        #expect(json["messages_echoed"] as? Int == 60)
        #expect((json["datagrams_echoed"] as? Int ?? 0) >= 95)
        #expect(json["alpn"] as? String == "ptt/1")
        await server.shutdown()
    }

    @Test func aioquicClientResumesWithZeroRTTOnOurServer() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let port = server.quicAddress!.port
        let session = FileManager.default.temporaryDirectory.appendingPathComponent("aioquic-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: session) }
        let arguments = [
            "\(Self.peers)/aioquic_client.py", "127.0.0.1", "\(port)", "--ca", Fixtures.ca,
            "--messages", "3", "--streams", "1", "--session-file", session, "--early",
        ]
        let first = try await runProgram(try Self.python, arguments)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await runProgram(try Self.python, arguments)
        #expect(second.status == 0, "\(second.stderr)")
        let json = try #require(jsonObject(second.stdout), "\(second.stdout)")
        #expect(json["resumed"] as? Bool == true)
        #expect(json["early_data_accepted"] as? Bool == true)
        #expect(json["messages_echoed"] as? Int == 3)
        await server.shutdown()
    }

    @Test(arguments: ["127.0.0.1", "::1"])
    func ourClientToAioquicServer(host: String) async throws {
        let peer = try await ChildServer.start(
            try Self.python,
            [
                "\(Self.peers)/aioquic_echo_server.py", "--host", host, "--port", "0", "--cert", Fixtures.serverCert,
                "--key", Fixtures.serverKey,
            ])
        defer { peer.stopNow() }
        let address = try #require(ServerAddress(peer.address))
        let connection = try await Fixtures.client().connect(to: address)
        try await withTimeout {
            let stream = try await connection.openStream()
            let sent = (0..<20).map { Array("aioquic message \($0)".utf8) }
            for message in sent { try await stream.send(message) }
            try await stream.finish()
            var received: [[UInt8]] = []
            for try await message in stream.messages { received.append(message.bytes) }
            #expect(received == sent)
        }
        #expect(connection.maxDatagramPayloadSize > 0)
        let echoed = try await withTimeout {
            try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    var count = 0
                    for await _ in connection.datagrams {
                        count += 1
                        if count == 100 { break }
                    }
                    return count
                }
                group.addTask {
                    for index in 0..<100 {
                        try connection.sendDatagram(Array("audio \(index)".utf8))
                        try await Task.sleep(for: .milliseconds(1))
                    }
                    try await Task.sleep(for: .seconds(2))
                    return -1
                }
                let first = try await group.next()!
                group.cancelAll()
                return first
            }
        }
        #expect(echoed == 100 || echoed == -1)
        let stats = await connection.statistics()
        #expect(stats.datagramsReceived >= 95)
        await connection.close()
    }

    @Test func ourClientResumesWithZeroRTTOnAioquic() async throws {
        let peer = try await ChildServer.start(
            try Self.python,
            [
                "\(Self.peers)/aioquic_echo_server.py", "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            ])
        defer { peer.stopNow() }
        let address = try #require(ServerAddress(peer.address))
        let client = Fixtures.client()
        let first = try await client.connect(to: address, earlyMessages: [EarlyMessage([1], replaySafe: true)])
        let saved = try await waitForResumptionState(first)
        await first.close()
        #expect(saved.allowsEarlyData)

        let message = Array("wake: channel 7".utf8)
        let connection = try await client.connect(
            to: address, resuming: saved,
            earlyMessages: [EarlyMessage(message, replaySafe: true)])
        #expect(connection.resumption == .resumed(earlyData: .accepted))
        var iterator = try #require(connection.earlyStream).messages.makeAsyncIterator()
        #expect(try await iterator.next()?.bytes == message)
        await connection.close()
    }
}
