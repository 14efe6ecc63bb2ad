import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// `serve --drain-notice S` (issue 36, the balancer target): on SIGTERM `/readyz` turns 503 at once while the relay
/// serves on for S seconds — a new handshake still completes, a connected phone is not asked to move yet — and then
/// drains as before: the phone is asked to move. A bad value is refused at start.
@Suite(.serialized, .integration) struct DrainNoticeTests {
    @Test func readinessTurnsFirstThenTheDrainAsksThePhonesToMove() async throws {
        // A long notice: the second handshake must fit in it on a loaded machine.
        let (relay, admin) = try await AdminEndpointTests.relayWithAdmin([
            "--drain-notice", "8", "--drain-seconds", "20",
        ])
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let first = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
        let asked = Locked(false)
        let moving = Task {
            let notice = try? await first.relayDraining()
            asked.withLock { $0 = notice != nil }
            return notice != nil
        }
        defer { moving.cancel() }  // (a notice published before its subscription is still seen: the current value)

        kill(relay.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(10)) { WorkerAdminTests.status(admin, "/readyz") == 503 })
        let metrics = try adminGet(admin, "/metrics").body
        #expect(metrics.contains("\nptt_relay_ready 0\n") && metrics.contains("\nptt_relay_draining 1\n"), "\(metrics)")

        // Through the notice the relay serves as before: a new phone connects and is echoed.
        let second = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
        try second.sendDatagram([7])
        _ = try await withTimeout { for await _ in second.datagrams { break } }
        #expect(!asked.withLock { $0 }, "no phone is asked to move during the notice")

        // Then the drain: the connected phone is asked to move.
        let movedOn = try await withTimeout(.seconds(30)) { await moving.value }
        #expect(movedOn, "the drain asked the first phone to move")
        await first.close(code: 0, reason: "moved")
        await second.close(code: 0, reason: "moved")
    }

    @Test func aBadNoticeIsRefused() async throws {
        let base = ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey]
        try await expectCLIRefuses(
            base + ["--drain-notice", "soon"], says: "--drain-notice takes a non-negative number")
        try await expectCLIRefuses(base + ["--drain-notice", "61"], says: "--drain-notice is 0 to 60 seconds")
    }
}
