import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// Slowloris on the TCP fallback: connections that never start TLS. A source over its pending-handshake budget is
/// reset at accept, the pending table never grows past its cap (the oldest handshake of the heaviest source makes
/// room), a silent connection is closed at the handshake deadline, and real clients connect and keep echoing
/// throughout.
@Suite("TCP Slowloris: pending-handshake budget, cap and deadline", .integration)
struct TCPSlowlorisTests {
    /// A TCP-only echo relay with the given pending limits; a long handshake timeout unless a test sets one.
    static func server(
        cap: Int = 1024, perSource: Int = 64, handshakeTimeout: Duration = .seconds(60)
    )
        async throws -> (TransportServer, ServerAddress, Task<Void, Never>)
    {
        var configuration = Fixtures.serverConfiguration()
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        configuration.maxPendingTCPHandshakes = cap
        configuration.maxPendingTCPHandshakesPerSource = perSource
        configuration.handshakeTimeout = handshakeTimeout
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        return (server, server.tcpAddress!, relay)
    }

    /// Waits until the server holds `expected` pending handshakes (bounded); returns the last count seen.
    static func pendingCount(_ server: TransportServer, reaches expected: Int) async -> Int {
        var count = await server.tcpAdmissionStatistics().pendingHandshakes
        for _ in 0..<250 where count != expected {
            try? await Task.sleep(for: .milliseconds(20))
            count = await server.tcpAdmissionStatistics().pendingHandshakes
        }
        return count
    }

    @Test func connectionsOverASourcesBudgetAreResetAtAcceptAndOtherSourcesStillConnect() async throws {
        let (server, address, relay) = try await Self.server(perSource: 4)
        defer { relay.cancel() }
        let attacker = SilentTCP()
        #expect(attacker.open(10, port: address.port, from: "127.0.0.2") == 10)

        let closed = await attacker.waitForClosed(within: .seconds(10)) { $0.count >= 6 }
        #expect(closed.count == 6, "the 6 connections over the budget of 4 were reset: \(closed)")
        #expect(await Self.pendingCount(server, reaches: 4) == 4)
        // Another source (the test client connects from 127.0.0.1) is not affected by 127.0.0.2's budget.
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        #expect(attacker.closedByServer.count == 6, "the budgeted connections stay until the handshake deadline")
        #expect(await server.tcpAdmissionStatistics().refusedOverSourceBudget == 6)
        withExtendedLifetime(attacker) {}  // the silent connections stay open until here
        await server.shutdown()
    }

    @Test func atThePendingCapTheOldestHandshakeMakesRoomAndARealClientStillConnects() async throws {
        let (server, address, relay) = try await Self.server(cap: 8, perSource: 1000)
        defer { relay.cancel() }
        let attacker = SilentTCP()
        #expect(attacker.open(8, port: address.port, from: "127.0.0.2") == 8)
        #expect(await Self.pendingCount(server, reaches: 8) == 8)
        #expect(attacker.closedByServer.isEmpty)

        // Four more over the cap, from other sources: the four oldest are dropped, the table stays at the cap.
        #expect(attacker.open(2, port: address.port, from: "127.0.0.3") == 2)
        #expect(attacker.open(2, port: address.port, from: "127.0.0.4") == 2)
        let closed = await attacker.waitForClosed(within: .seconds(10)) { $0.count >= 4 }
        #expect(closed == [0, 1, 2, 3], "the four longest-pending handshakes were dropped: \(closed)")
        #expect(await Self.pendingCount(server, reaches: 8) == 8)

        // A real client completes its handshake with the table full of silent connections.
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        #expect(await Self.pendingCount(server, reaches: 7) == 7, "its slot was taken from the oldest silent one")
        let statistics = await server.tcpAdmissionStatistics()
        #expect(statistics.evictedPendingHandshakes == 5 && statistics.refusedOverSourceBudget == 0, "\(statistics)")
        withExtendedLifetime(attacker) {}  // the silent connections stay open until here
        await server.shutdown()
    }

    @Test func aSilentConnectionIsClosedAtTheHandshakeDeadline() async throws {
        let (server, address, relay) = try await Self.server(handshakeTimeout: .milliseconds(500))
        defer { relay.cancel() }
        let attacker = SilentTCP()
        #expect(attacker.open(3, port: address.port, from: "127.0.0.2") == 3)
        let closed = await attacker.waitForClosed(within: .seconds(15)) { $0.count == 3 }
        #expect(closed == [0, 1, 2], "silent connections outlived the 0.5 s handshake deadline")
        try await TCPBadInputTests.expectNoConnectionsLeft(server)
        #expect(await server.tcpAdmissionStatistics().pendingHandshakes == 0)
        await server.shutdown()
    }

    @Test func anEstablishedClientKeepsEchoingDuringAnAttackFromManySources() async throws {
        let (server, address, relay) = try await Self.server(cap: 32, perSource: 8)
        defer { relay.cancel() }
        let connection = try await withTimeout { try await TCPFallbackTests.client(.tcpOnly).connect(to: address) }
        #expect(connection.path == .tcp)
        let echoed = try await withTimeout(.seconds(120)) {
            let stream = try await connection.openStream()
            var replies = stream.messages.makeAsyncIterator()
            let attacker = SilentTCP()
            var echoed = 0
            for round in 0..<20 {
                // 12 silent connections from each of 5 sources per round: over every budget (8) and, together,
                // over the cap (32).
                for source in 2...6 { attacker.open(12, port: address.port, from: "127.0.0.\(source)") }
                let message = Array("round \(round)".utf8)
                try await stream.send(message)
                if try await replies.next()?.bytes == message { echoed += 1 }
            }
            try await stream.finish()
            return echoed
        }
        #expect(echoed == 20, "the established connection echoed every round of the attack")
        let statistics = await server.tcpAdmissionStatistics()
        #expect(statistics.refusedOverSourceBudget > 0 && statistics.evictedPendingHandshakes > 0, "\(statistics)")
        #expect(await server.tcpAdmissionStatistics().pendingHandshakes <= 32)
        await connection.close()
        await server.shutdown()
    }

    /// Issue 21, item 12: a real client on a slow path (its ClientHello, then 1.5 s before the rest of its
    /// handshake) while silent connections from 8 sources, each inside its budget, overfill the pending table. The
    /// evictions come from the sources holding the most; before, the slow client's was the oldest and went first.
    @Test func aSlowClientIsNotEvictedByAFloodFromSeveralSources() async throws {
        guard let python = TCPBadInputTests.python() else { return }
        let (server, address, relay) = try await Self.server(cap: 16, perSource: 4)
        defer { relay.cancel() }
        async let slow = runProgram(
            python,
            [
                TCPHandshakeInputTests.attacker, "\(address.port)", "--ca", Fixtures.ca, "--attack", "slow-client",
                "--delay", "1.5",
            ])
        #expect(await Self.pendingCount(server, reaches: 1) == 1, "the slow client's handshake is pending")
        let attacker = SilentTCP()
        for source in 2...9 { attacker.open(4, port: address.port, from: "127.0.0.\(source)") }
        let result = try await slow
        let report = jsonObject(result.stdout)
        #expect(report?["served"] as? Bool == true, "the slow client was shut out: \(result.stdout) \(result.stderr)")
        let statistics = await server.tcpAdmissionStatistics()
        #expect(statistics.evictedPendingHandshakes >= 16, "\(statistics)")
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        withExtendedLifetime(attacker) {}  // the silent connections stay open until here
        await server.shutdown()
    }
}
