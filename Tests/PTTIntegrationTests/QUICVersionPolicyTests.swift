import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// Issue 31, item 13: the relay's version policy must not cost the wake. A relay on ngtcp2 1.x that moves a client
/// starting in v1 and offering v2 to v2 (RFC 9368) binds its ticket to v2 (RFC 9369 §7); aioquic 1.7.2 (whose default
/// `supported_versions` is v1 then v2: `--quic-version both`) starts its next connection in v1 again and was never
/// resumed, 0 of 4 wakes. By default the relay now keeps every client in the version it started in;
/// `prefersQUICVersion2` (`serve --prefer-quic-v2`) is the upgrade, for fleets whose clients remember the version.
@Suite("QUIC version policy keeps the wake", .serialized, .integration)
struct QUICVersionPolicyTests {
    static func relay(prefersV2: Bool) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        configuration.prefersQUICVersion2 = prefersV2
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        return (server, try #require(server.quicAddress), relay)
    }

    /// Three connections of aioquic's default client, each resuming the last one's ticket with its messages early.
    static func aioquicWakes(_ address: ServerAddress) async throws -> [[String: Any]] {
        let session = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-policy-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: session) }
        var runs: [[String: Any]] = []
        for _ in 0..<3 {
            runs.append(
                try await AioquicInteropTests.runClient(
                    port: address.port,
                    ["--messages", "2", "--quic-version", "both", "--session-file", session, "--early"]))
        }
        return runs
    }

    @Test(.enabled(if: peersEnabled)) func aDefaultAioquicClientWakesInZeroRTTOnItsSecondAndThirdConnection()
        async throws
    {
        let (server, address, relay) = try await Self.relay(prefersV2: false)
        defer { relay.cancel() }
        let runs = try await Self.aioquicWakes(address)
        #expect(runs[0]["resumed"] as? Bool == false && runs[0]["quic_version"] as? Int == 1, "\(runs[0])")
        for run in runs.dropFirst() {
            #expect(run["resumed"] as? Bool == true, "\(run)")
            #expect(run["early_data_accepted"] as? Bool == true, "the wake kept its 0-RTT: \(run)")
            #expect(run["quic_version"] as? Int == 1 && run["messages_echoed"] as? Int == 2, "\(run)")
        }
        await server.shutdown()
    }

    /// Why the upgrade is not the default: with it, the same client's next connections start in v1 with a v2
    /// ticket and are not resumed (ngtcp2 1.x only; 0.12.1 speaks v1 alone and has nothing to upgrade to).
    @Test(.enabled(if: peersEnabled && LinkedLibraries.supportsQUICVersion2, "QUIC v2 needs ngtcp2 1.x"))
    func withTheV2PreferenceTheSameClientLosesItsZeroRTT() async throws {
        let (server, address, relay) = try await Self.relay(prefersV2: true)
        defer { relay.cancel() }
        let runs = try await Self.aioquicWakes(address)
        #expect(runs[0]["quic_version"] as? Int == 2, "moved to v2: \(runs[0])")
        for run in runs.dropFirst() {
            #expect(run["early_data_accepted"] as? Bool == false, "a v2 ticket in a v1 Initial: \(run)")
        }
        await server.shutdown()
    }

    /// Our client remembers the version it used (`ResumptionState.quicVersion`) and resumes in it with 0-RTT:
    /// v1 at a relay with the default policy, v2 when pinned to v2 or moved there by a relay preferring it.
    @Test func ourClientResumesInTheVersionItUsed() async throws {
        var cases: [(prefersV2: Bool, pinned: QUICVersion?, expected: QUICVersion)] = [(false, nil, .version1)]
        if LinkedLibraries.supportsQUICVersion2 {
            cases += [(false, .version2, .version2), (true, nil, .version2)]
        }
        for (prefersV2, pinned, expected) in cases {
            let (server, address, relay) = try await Self.relay(prefersV2: prefersV2)
            var configuration = ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
            configuration.quicVersion = pinned
            let client = TransportClient(configuration: configuration)
            var state = try await ZeroRTTBudgetTests.ticket(client, address)
            #expect(state.quicVersion == expected, "prefers v2: \(prefersV2), pinned: \(String(describing: pinned))")
            for wake in 0..<2 {
                let connection = try await client.connect(
                    to: address, resuming: state, earlyMessages: [EarlyMessage([UInt8(wake)], replaySafe: true)])
                #expect(
                    connection.resumption == .resumed(earlyData: .accepted), "\(connection.resumptionDiagnostic ?? "")")
                #expect(await connection.statistics().quicVersion == expected)
                state = try await waitForResumptionState(connection)
                await connection.close()
            }
            relay.cancel()
            await server.shutdown()
        }
    }
}
