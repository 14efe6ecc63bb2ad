import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

@testable import PTTTransport

/// Compatible version negotiation (RFC 9368) and the version in resumption state (RFC 9369 §5). A client that
/// negotiates (the default) starts in v1, offers v2 too, and ends in v2 at a relay on ngtcp2 1.x that prefers it
/// (`prefersQUICVersion2`) or at aioquic; v1-only clients stay in v1, and so does everyone at a relay with the default
/// policy (`QUICVersionPolicyTests`). On 0.12.1 nothing negotiates and everything speaks v1. The saved state
/// remembers the version, the next connection starts in it, and 0-RTT, datagrams and migration work there.
@Suite("QUIC version negotiation", .serialized, .integration)
struct QUICVersionNegotiationTests {
    /// Where a negotiating client ends up at a relay that prefers v2, or at aioquic: v2 where ngtcp2 speaks it.
    static let negotiated: QUICVersion = LinkedLibraries.supportsQUICVersion2 ? .version2 : .version1

    /// An echo relay that moves clients offering v2 there (`prefersQUICVersion2`), with `adjust` applied.
    static func preferringV2(
        _ adjust: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        configuration.prefersQUICVersion2 = true
        adjust(&configuration)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        return (server, try #require(server.quicAddress), relay)
    }

    static func client(_ version: QUICVersion? = nil) -> TransportClient {
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        configuration.quicVersion = version
        return TransportClient(configuration: configuration)
    }

    /// A message and a datagram make the round trip; returns the version the connection spoke.
    static func echoes(_ connection: TransportConnection) async throws -> QUICVersion? {
        try await withTimeout {
            let stream = try await connection.openStream()
            try await stream.send(Array("which version".utf8))
            #expect(try await stream.nextMessage()?.bytes == Array("which version".utf8))
            try connection.sendDatagram([9, 9, 9])
            for await datagram in connection.datagrams {
                #expect(datagram.payload == [9, 9, 9])
                break
            }
        }
        return await connection.statistics().quicVersion
    }

    @Test func aNegotiatingClientMovesToV2WhileAV1OnlyClientStaysInV1() async throws {
        let (server, address, relay) = try await Self.preferringV2()
        defer { relay.cancel() }
        let negotiating = try await Self.client().connect(to: address)
        #expect(try await Self.echoes(negotiating) == Self.negotiated)
        await negotiating.close()
        let v1Only = try await Self.client(.version1).connect(to: address)
        #expect(try await Self.echoes(v1Only) == .version1)
        await v1Only.close()
        await server.shutdown()
    }

    @Test func theSavedStateRemembersTheVersionAndZeroRTTTravelsInIt() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverEarlyDatagrams: true)
        configuration.prefersQUICVersion2 = true
        let server = try await TransportServer.bind(configuration: configuration)
        let early = PolledLog([Bool]())
        let relay = Task {
            await EchoRelay.run(server) { event in
                if case .datagram(_, _, let isEarly) = event { early.update { $0.append(isEarly) } }
            }
        }
        defer { relay.cancel() }
        let address = try #require(server.quicAddress)
        let client = Self.client()
        let first = try await client.connect(to: address)
        let saved = try ResumptionState(serialized: try await waitForResumptionState(first).serialized())
        #expect(saved.quicVersion == Self.negotiated)
        await first.close()

        let frame = [UInt8](repeating: 0x2b, count: 60)
        let resumed = try await client.connect(
            to: address, resuming: saved, earlyMessages: [EarlyMessage(Array("early".utf8), replaySafe: true)],
            earlyDatagrams: [frame])
        #expect(resumed.resumption == .resumed(earlyData: .accepted), "\(resumed.resumptionDiagnostic ?? "")")
        let earlyStream = try #require(resumed.earlyStream)
        try await withTimeout {
            let echoed = try await earlyStream.nextMessage()
            #expect(echoed?.bytes == Array("early".utf8))
            for await datagram in resumed.datagrams {
                #expect(datagram.payload == frame)
                break
            }
        }
        #expect(early.snapshot == [true], "the frame travelled in 0-RTT")
        #expect(await resumed.statistics().quicVersion == Self.negotiated)
        #expect(try await waitForResumptionState(resumed).quicVersion == Self.negotiated)
        await resumed.close()

        guard LinkedLibraries.supportsQUICVersion2 else { return }
        // A v2 ticket is bound to v2: a client pinned to v1 makes a full handshake and says why.
        let pinned = try await Self.client(.version1).connect(to: address, resuming: saved)
        #expect(pinned.resumption == .none)
        #expect(pinned.resumptionDiagnostic?.contains("issued in QUIC v2") == true, "\(pinned.resumptionDiagnostic!)")
        #expect(try await Self.echoes(pinned) == .version1)
        await pinned.close()
        await server.shutdown()
    }

    @Test(.enabled(if: peersEnabled)) func migrationKeepsTheNegotiatedVersion() async throws {
        let (server, address, relay) = try await Self.preferringV2()
        defer { relay.cancel() }
        let connection = try await Self.client().connect(to: address)
        let call = try await withTimeout(.seconds(30)) { try await ClientMigrationTests.call(connection) }
        try await ClientMigrationTests.expectCallSurvived(call)
        #expect(call.statistics.quicVersion == Self.negotiated)
        await connection.close()
        await server.shutdown()
    }

    @Test(.enabled(if: peersEnabled)) func aioquicClientsNegotiateOrStayInV1() async throws {
        let (server, address, relay) = try await Self.preferringV2()
        defer { relay.cancel() }
        for (offer, expected) in [("both", Self.negotiated), ("1", QUICVersion.version1)] {
            let json = try await AioquicInteropTests.runClient(
                port: address.port, ["--messages", "3", "--datagrams", "10", "--quic-version", offer])
            #expect(json["quic_version"] as? Int == Int(expected.description), "aioquic offering \(offer)")
            #expect(json["messages_echoed"] as? Int == 3)
        }
        await server.shutdown()
    }

    @Test(.enabled(if: peersEnabled)) func aV2TicketMeetingAV1OnlyServerFallsBackToV1() async throws {
        guard LinkedLibraries.supportsQUICVersion2 else { return }  // 0.12.1 never saves a v2 ticket
        let (server, address, relay) = try await Self.preferringV2()
        let first = try await Self.client().connect(to: address)
        var saved = try await waitForResumptionState(first)
        await first.close()
        relay.cancel()
        await server.shutdown()
        #expect(saved.quicVersion == .version2)
        let peer = try await ChildServer.start(
            try AioquicInteropTests.python,
            [
                "\(AioquicInteropTests.peers)/aioquic_echo_server.py", "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey, "--v1-only",
            ])
        defer { peer.stopNow() }
        let v1Only = try #require(ServerAddress(peer.address))
        saved.blob.port = v1Only.port  // the relay's address now answers with a server that speaks v1 only
        let connection = try await Self.client().connect(to: v1Only, resuming: saved)
        #expect(connection.resumption == .none)
        #expect(connection.resumptionDiagnostic?.contains("Version Negotiation") == true, "\(connection)")
        #expect(try await Self.echoes(connection) == .version1)
        await connection.close()
    }

    @Test(.enabled(if: peersEnabled)) func aioquicsServerFollowsOurOfferToV2() async throws {
        let peer = try await ChildServer.start(
            try AioquicInteropTests.python,
            [
                "\(AioquicInteropTests.peers)/aioquic_echo_server.py", "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            ])
        defer { peer.stopNow() }
        let connection = try await Self.client().connect(to: try #require(ServerAddress(peer.address)))
        #expect(try await Self.echoes(connection) == Self.negotiated)
        await connection.close()
    }
}
