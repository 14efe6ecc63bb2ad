import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// Issue 21, item 5: 1-byte STREAM frames, two per 8 KiB reassembly chunk, offset 0 never sent, pinned about 6 MB of
/// the relay per connection with 4 MiB / 1 MiB windows and 100 streams. With windows derived from the largest
/// message and 4 streams, one such connection costs the relay at most 256 KiB, its own state included.
@Suite("Reassembly memory a stranger can pin", .serialized, .enabled(if: peersEnabled), .integration)
struct ReassemblyBudgetTests {
    static let pinner = "\(Fixtures.root)/Tests/Peers/quic_reassembly_pinner.py"

    @Test func outOfOrderBytesPinAtMost256KiBPerConnection() async throws {
        let relay = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--event-loops", "1",
            ])
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let connections = 40
        let result = try await runProgram(
            try AioquicInteropTests.python,
            [
                Self.pinner, "127.0.0.1", "\(address.port)", "--ca", Fixtures.ca, "--connections", "\(connections)",
                "--relay-pid", "\(relay.processIdentifier)", "--after", "3",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(jsonObject(result.stdout), "\(result.stdout) \(result.stderr)")
        let before = try #require(report["rss_before_kib"] as? Int)
        let pinned = try #require(report["rss_pinned_kib"] as? Int)
        #expect((report["frames"] as? Int ?? 0) > connections * 10, "the pinner sent its frames: \(report)")
        #expect(
            (pinned - before) / connections <= 256, "\((pinned - before) / connections) KiB per connection: \(report)")

        #expect(relay.isRunning, "the relay died (status \(relay.terminationStatus))")
        let next = try await HostilePeerTests.Call(address)
        #expect(try await next.roundTrip("next client"), "the next client was not served")
        await next.connection.close()
    }
}
