import ChildProcesses
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// A two-loop relay with QUIC-LB connection IDs, behind a NAT that rebinds once and records the IDs the relay
/// chose as they cross it, and a client that migrates to another address (so it switches to an ID the relay
/// issued in NEW_CONNECTION_ID): every such ID has the configuration's length and decodes to the relay's server ID,
/// the message stream and the datagrams flow, and each packet reaches its connection's loop (the kernel's program
/// with a plaintext configuration; decryption and forwarding between loops with a key).
@Suite("QUIC-LB relay", .serialized, .integration)
struct QUICLBRelayTests {
    static let configurations = [
        try! QUICLBConfiguration(configRotation: 2, serverID: [0x5e, 0x12, 0x0a], nonceLength: 6),
        try! QUICLBConfiguration(
            configRotation: 4, serverID: [0x77, 0x01], nonceLength: 9, key: Array(100..<116), encodesLength: true),
        try! QUICLBConfiguration(configRotation: 0, serverID: Array(1...6), nonceLength: 10, key: Array(7..<23)),
    ]

    /// With `retry`, every client is validated with Retry first: the Retry's source ID follows the configuration too.
    @Test(arguments: zip(configurations, [false, true, false]))
    func everyIDTheRelayIssuesNamesIt(_ configuration: QUICLBConfiguration, retry: Bool) async throws {
        let call = try await NATRebindingTests.call(
            ["--rebind-after", "30", "--cid-length", "\(configuration.connectionIDLength)"],
            clientArguments: ["--migrate-after", "150", "--migrate-to", "127.0.0.2"]
        ) {
            $0.eventLoops = 2
            $0.quicLB = configuration
            $0.requireRetry = retry
        }
        #expect(call.echoed >= NATRebindingTests.minimumEchoed, "\(call.counters)")
        let clientDCIDs = call.counters["client_dcids"] as? [String] ?? []
        let serverSCIDs = call.counters["server_scids"] as? [String] ?? []
        #expect(clientDCIDs.count >= 2, "the migration moved to a NEW_CONNECTION_ID ID: \(clientDCIDs)")
        #expect(serverSCIDs.count >= (retry ? 2 : 1), "the Retry's and the handshake's: \(serverSCIDs)")
        let codec = try QUICLBCodec(configuration)
        for id in clientDCIDs + serverSCIDs {
            let bytes = try #require(Hex.bytes(id))
            #expect(bytes.count == configuration.connectionIDLength, "\(id)")
            #expect(codec.serverID(of: bytes) == configuration.serverID, "\(id) does not name the relay")
        }
        let counters = call.loopCounters
        #expect(counters.count == 2)
        if configuration.key == nil {
            #expect(call.steering == .kernelProgram)
            #expect(counters.allSatisfy { $0.packetsHandedOver == 0 }, "\(counters)")
        } else {
            #expect(call.steering == .forwarding)
            let handedOver = counters.map(\.packetsHandedOver).reduce(0, +)
            #expect(handedOver == counters.map(\.packetsTakenOver).reduce(0, +), "\(counters)")
        }
    }

    /// `serve --quic-lb` with a key (four pass) and two loops: a call through the recording NAT works and the IDs
    /// the relay chose carry the server ID given on the command line.
    @Test func serveTakesTheConfigurationFromItsFlag() async throws {
        let relay = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--event-loops", "2", "--quic-lb",
                "cr=3,server-id=c0ffee,nonce-len=5,key=00112233445566778899aabbccddeeff",
            ])
        defer { relay.stopNow() }
        let port = try #require(ServerAddress(relay.address)).port
        let nat = try await ChildServer.start(
            try AioquicInteropTests.python,
            [NATRebindingTests.nat, "\(port)", "--rebind-after", "1000", "--cid-length", "9"])
        defer { nat.stopNow() }
        let result = try await runProgram(
            Subprocess.cli,
            [
                "connect", nat.address, "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic",
                "--json", "--datagrams", "50", "--interval", "10",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect((jsonObject(result.stdout)?["datagrams_echoed"] as? Int ?? 0) >= 45, "\(result.stdout)")
        let counters = jsonObject(await nat.stop().output) ?? [:]
        let ids = (counters["client_dcids"] as? [String] ?? []) + (counters["server_scids"] as? [String] ?? [])
        #expect(!ids.isEmpty, "\(counters)")
        let codec = try QUICLBCodec(
            try QUICLBConfiguration(parsing: "cr=3,server-id=c0ffee,nonce-len=5,key=00112233445566778899aabbccddeeff"))
        for id in ids { #expect(codec.serverID(of: try #require(Hex.bytes(id))) == [0xc0, 0xff, 0xee], "\(id)") }
    }
}
