import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// Issue 21, item 13, end to end: an attacker who completes one handshake per ticket (as from many sources) and
/// spends every ticket on a 0-RTT wake cannot take the 0-RTT of a ticket already in a real client's hands. The
/// relay (`serve`, a child process) issues at most `--zero-rtt-tickets` tickets with 0-RTT per window and reserves
/// an anti-replay entry for each when it issues it; before, each first use of a ticket took an entry, so the
/// attacker's wakes filled the store and the real wake was `rejected`.
@Suite("0-RTT ticket budget end to end", .serialized, .integration)
struct ZeroRTTBudgetTests {
    static let budget = 20

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aFloodOfTicketsLeavesARealClientItsZeroRTT(policy: FallbackPolicy) async throws {
        // --no-source-limits: every attacker connection comes from 127.0.0.1, standing for many sources.
        let relay = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--zero-rtt-tickets", "\(Self.budget)", "--no-source-limits",
            ])
        let address = try #require(ServerAddress(relay.address))
        let client = TCPFallbackTests.client(policy)
        let real = try await Self.ticket(client, address)

        var tickets: [ResumptionState] = []
        for _ in 0..<(2 * Self.budget) { tickets.append(try await Self.ticket(client, address)) }
        var outcomes: [ResumptionStatus] = []
        for ticket in tickets { outcomes.append(try await Self.wake(client, address, ticket)) }
        let accepted = outcomes.filter { $0 == .resumed(earlyData: .accepted) }.count
        #expect(outcomes.allSatisfy { $0 != .none }, "every attacker wake still resumed: \(outcomes)")
        #expect(accepted < Self.budget, "the attacker's 0-RTT stays within the budget the real ticket left")
        #expect(accepted > 0, "tickets issued within the budget carry 0-RTT")

        #expect(
            try await Self.wake(client, address, real) == .resumed(earlyData: .accepted),
            "the real client's ticket lost its 0-RTT to the flood (\(policy))")
        #expect(
            try await Self.wake(client, address, real) == .resumed(earlyData: .rejected),
            "a ticket carries 0-RTT once")
        let (status, _) = await relay.stop()
        #expect(status == 0, "the relay stayed up and exits 0")
    }

    /// One full handshake: the state its client saves (its first ticket).
    static func ticket(_ client: TransportClient, _ address: ServerAddress) async throws -> ResumptionState {
        let connection = try await client.connect(to: address)
        let state = try await waitForResumptionState(connection)
        await connection.close()
        return state
    }

    /// A wake that resumes `state` with a replay-safe early message: what became of its 0-RTT.
    static func wake(
        _ client: TransportClient, _ address: ServerAddress, _ state: ResumptionState
    ) async throws -> ResumptionStatus {
        let connection = try await client.connect(
            to: address, resuming: state, earlyMessages: [EarlyMessage(Array("pending 7".utf8), replaySafe: true)])
        let outcome = connection.resumption
        await connection.close()
        return outcome
    }
}
