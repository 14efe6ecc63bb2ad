import ChildProcesses
import Foundation
import PTTTransport
import Testing

/// A phone's NAT rebinds mid-call (`Tests/Peers/rebinding_nat.py` moves the client's mapping to a new port or
/// address after 30 packets and deletes the old one): the relay must follow the client to its new address —
/// ngtcp2 validates the new path, the relay sends every packet to the address ngtcp2 chose — so the call goes on.
@Suite("NAT rebinding: the relay follows the phone", .serialized, .enabled(if: peersEnabled))
struct NATRebindingTests {
    static let nat = "\(Fixtures.root)/Tests/Peers/rebinding_nat.py"

    @Test(arguments: [nil, "127.0.0.2"])
    func audioKeepsFlowingAfterARebinding(newAddress: String?) async throws {
        let events = EventLog()
        let server = try await TransportServer.bind(configuration: Fixtures.serverConfiguration())
        let relay = Task { await EchoRelay.run(server) { events.append($0) } }
        defer { relay.cancel() }
        let serverPort = try #require(ServerAddress(server.quicAddress!)).port
        let nat = try await ChildServer.start(
            try AioquicInteropTests.python,
            [Self.nat, "\(serverPort)", "--rebind-after", "30"] + (newAddress.map { ["--new-address", $0] } ?? []))
        defer { nat.stopNow() }

        let result = try await runProgram(
            Subprocess.cli,
            [
                "connect", nat.address, "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic",
                "--message", "join 7", "--datagrams", "300", "--json",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(jsonObject(result.stdout), "\(result.stdout) \(result.stderr)")
        // Only what was in flight at the moment of the rebinding may be lost (before the fix: 12 of 300).
        #expect((json["datagrams_echoed"] as? Int ?? 0) >= 290, "\(json)")

        let counters = try #require(jsonObject(await nat.stop().output))
        #expect(counters["rebound"] as? Bool == true, "\(counters)")
        #expect((counters["server_packets_new_mapping"] as? Int ?? 0) > 250, "\(counters)")
        let changes = events.all().compactMap { event -> (String, String)? in
            if case .pathChanged(let from, let to) = event { return (from, to) }
            return nil
        }
        #expect(changes.count == 1, "path changes seen by the relay: \(changes)")
        if let newAddress { #expect(changes.first?.1.hasPrefix(newAddress + ":") == true, "\(changes)") }
        await server.shutdown()
    }
}
