import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

@testable import PTTTransport

/// Issue 31, item 8: relays sharing the fleet's reset secret answered each other's connection IDs with the stateless
/// reset the client holds (8/8 with QUIC-LB, 8/8 without), so anyone who learned a phone's connection ID could end
/// its call through any relay (RFC 9000 §21.11). Now a relay resets only IDs it issued — by its QUIC-LB server ID,
/// or by the tag its IDs carry — with tokens of its own, derived from the fleet's secret and its identity.
///
/// Two child relays share the secret; the client calls relay A through `Tests/Peers/cuttable_udp_proxy.py
/// --mirror-to B`, which copies every short-header packet of the client's to relay B and forwards whatever B answers
/// to the client as if A had sent it (an attacker spoofing the phone's address). Relay A, killed and restarted with
/// the same identity, still resets its own old connection at once.
@Suite(.serialized, .integration) struct ResetOracleTests {
    @Test(arguments: [false, true])
    func aRelayResetsOnlyTheConnectionIDsItIssued(quicLB: Bool) async throws {
        let python = try AioquicInteropTests.python
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-oracle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func serve(_ port: UInt16, serverID: String) async throws -> ChildServer {
            try await ChildServer.start(
                Subprocess.cli,
                [
                    "serve", "--listen", "127.0.0.1:\(port)", "--cert", Fixtures.serverCert, "--key",
                    Fixtures.serverKey, "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                    "--reset-secret", directory.appendingPathComponent("reset.key").path,
                ] + (quicLB ? ["--quic-lb", "cr=1,server-id=\(serverID),nonce-len=8"] : []))
        }
        let (portA, relayA) = try await StablePort.first { port in (port, try await serve(port, serverID: "0a")) }
        var relayA2: ChildServer?
        defer {
            relayA.kill()
            relayA2?.kill()
        }
        let relayB = try await serve(0, serverID: "0b")
        defer { relayB.kill() }
        let portB = try #require(ServerAddress(relayB.address)).port
        let path = try await ChildServer.start(
            python, [TransportLinkTests.proxy, "\(portA)", "--mirror-to", "\(portB)"])
        defer { path.kill() }

        let client = TransportClient(configuration: TransportLinkTests.configuration(.quicOnly))
        let call = try await HostilePeerTests.Call(try #require(ServerAddress(path.address)), client: client)
        // 40 control messages 25 ms apart: each, and every acknowledgement, also reaches relay B.
        var echoed = 0
        for index in 0..<40 {
            let message: [UInt8] = [UInt8(index), 0x42]
            try await call.stream.send(message)
            if try await withTimeout(.seconds(5), { try await call.stream.nextMessage()?.bytes }) == message {
                echoed += 1
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(echoed == 40, "the call through relay A: \(echoed) of 40 echoed")
        #expect(call.connection.status == .ready, "\(call.connection.status)")

        // Relay A crashes and comes back with the same identity: it resets its own old connection at once.
        relayA.kill()
        relayA2 = try await serve(portA, serverID: "0a")
        try? await call.stream.send([0xff])
        let reason = try await withTimeout(.seconds(20)) { try await call.connection.closed() }
        #expect(reason.error.code == .connectionReset, "\(reason)")

        let (_, output) = await path.stop()
        let counters = try #require(jsonObject(output), "the proxy printed: \(output)")
        #expect((counters["mirrored"] as? Int ?? 0) >= 40, "\(counters)")
        #expect(counters["mirror_replies"] as? Int == 0, "relay B answered the client's IDs: \(counters)")
    }

    /// A relay's identity: the one configured, else its QUIC-LB server ID (with the config rotation), else the host
    /// name and the QUIC port — the same on every restart, different on every relay of a fleet.
    @Test func aRelaysIdentityDefaultsToItsServerIDOrItsHostAndPort() throws {
        var configuration = Fixtures.serverConfiguration()
        let host = configuration.resolvedRelayIdentity(quicPort: 4433)
        #expect(host.hasSuffix(" 4433") && host != configuration.resolvedRelayIdentity(quicPort: 4434))
        configuration.quicLB = try QUICLBConfiguration(configRotation: 2, serverID: [0x0a, 0x0b], nonceLength: 6)
        #expect(configuration.resolvedRelayIdentity(quicPort: 4433) == "quic-lb cr=2 server-id=0a0b")
        configuration.relayIdentity = "relay-7.eu"
        #expect(configuration.resolvedRelayIdentity(quicPort: 4433) == "relay-7.eu")
    }
}
