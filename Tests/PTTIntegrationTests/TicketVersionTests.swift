import ChildProcesses
import Foundation
import PTTTalkGroups
import TestSupport
import Testing

@testable import PTTTransport

/// A session ticket belongs to the QUIC version of the connection that issued it (RFC 9369 §5): the relay opens a
/// ticket only in a connection that starts in that version. aioquic's client resumes whatever ticket it holds in
/// the version it starts in, which makes it the independent client that presents a v2 ticket in a v1 connection.
@Suite("Session tickets are bound to their QUIC version", .serialized, .enabled(if: peersEnabled), .integration)
struct TicketVersionTests {
    @Test func aV2TicketResumesInV2AndNotInV1() async throws {
        guard LinkedLibraries.supportsQUICVersion2 else { return }  // 0.12.1: every ticket is a v1 ticket
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverEarlyDatagrams: false)
        configuration.prefersQUICVersion2 = true  // the option that moves a client offering v2 there
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let port = try #require(server.quicAddress).port
        let session = FileManager.default.temporaryDirectory.appendingPathComponent("ticket-version-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: session) }
        func run(_ version: String, early: Bool = false) async throws -> [String: Any] {
            try await AioquicInteropTests.runClient(
                port: port,
                ["--messages", "2", "--quic-version", version, "--session-file", session] + (early ? ["--early"] : []))
        }
        // Starts in v1, offers v2, is moved there: the ticket is issued in v2.
        let first = try await run("both")
        #expect(first["quic_version"] as? Int == 2 && first["resumed"] as? Bool == false, "\(first)")
        // Starts in v1 with that ticket: refused (a full handshake), and the connection still ends in v2.
        let v1 = try await run("both", early: true)
        #expect(v1["resumed"] as? Bool == false, "\(v1)")
        #expect(v1["early_data_accepted"] as? Bool == false)
        #expect(v1["quic_version"] as? Int == 2 && v1["messages_echoed"] as? Int == 2)
        // Starts in v2 with a v2 ticket: resumed, 0-RTT accepted.
        let v2 = try await run("2", early: true)
        #expect(v2["resumed"] as? Bool == true, "\(v2)")
        #expect(v2["early_data_accepted"] as? Bool == true)
        #expect(v2["quic_version"] as? Int == 2 && v2["messages_echoed"] as? Int == 2)
        await server.shutdown()
    }

    @Test func aV1TicketDoesNotResumeAV2OnlyConnection() async throws {
        guard LinkedLibraries.supportsQUICVersion2 else { return }
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let session = FileManager.default.temporaryDirectory.appendingPathComponent("ticket-version-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: session) }
        let arguments = ["--messages", "1", "--session-file", session, "--quic-version"]
        let v1 = try await AioquicInteropTests.runClient(port: address.port, arguments + ["1"])
        #expect(v1["quic_version"] as? Int == 1)
        let v1Again = try await AioquicInteropTests.runClient(port: address.port, arguments + ["1"])
        #expect(v1Again["resumed"] as? Bool == true, "a v1 ticket resumes in v1: \(v1Again)")
        let v2 = try await AioquicInteropTests.runClient(port: address.port, arguments + ["2"])
        #expect(v2["resumed"] as? Bool == false, "\(v2)")
        #expect(v2["quic_version"] as? Int == 2 && v2["messages_echoed"] as? Int == 1)
        await server.shutdown()
    }
}
