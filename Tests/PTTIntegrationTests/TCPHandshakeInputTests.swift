import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportIO

/// What a relay's TCP port reads before the TLS handshake completes (issue 21, item 9), against a relay in a child
/// process (`ptt-transport serve --no-udp`) and `Tests/Peers/tls_handshake_attacker.py`: a ClientHello in several
/// records that arrive together is answered at once (GnuTLS reads one record per `gnutls_handshake` call), and a
/// client that streams handshake records without end is closed after a bounded number of bytes instead of
/// being buffered until the handshake timeout. The relay stays up and serves the next client.
@Suite(
    "TCP handshake input: multi-record ClientHellos answered, pre-handshake bytes bounded", .serialized, .integration)
struct TCPHandshakeInputTests {
    static let attacker = "\(Fixtures.root)/Tests/Peers/tls_handshake_attacker.py"

    static func runAttacker(_ python: String, port: UInt16, _ arguments: [String]) async throws -> [String: Any] {
        let result = try await runProgram(python, [attacker, "\(port)"] + arguments, timeout: 30)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(jsonObject(result.stdout), "attacker printed: \(result.stdout) \(result.stderr)")
    }

    /// How a ClientHello is cut: records, and padding that makes it large (63,000 bytes: 63.3 KB in 4 records).
    struct Split: Sendable, CustomTestStringConvertible {
        let records: Int
        let padding: Int
        var testDescription: String { "\(records) records" + (padding > 0 ? ", padded by \(padding) bytes" : "") }

        static let all = [
            Split(records: 4, padding: 0), Split(records: 8, padding: 0), Split(records: 4, padding: 63_000),
        ]
    }

    @Test(arguments: Split.all)
    func aClientHelloInSeveralRecordsArrivingTogetherIsAnsweredAtOnce(split: Split) async throws {
        guard let python = TCPBadInputTests.python() else { return }
        let relay = try await startChildRelay(tcpOnly: true, events: false)
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        var arguments = ["--attack", "split-client-hello", "--ca", Fixtures.ca, "--records", "\(split.records)"]
        if split.padding > 0 { arguments += ["--pad", "\(split.padding)"] }
        let report = try await Self.runAttacker(python, port: address.port, arguments)
        #expect(report["answered"] as? Bool == true, "no ServerHello: \(report)")
        // Before: unanswered, closed at the 10 s handshake timeout.
        #expect((report["answered_ms"] as? Double ?? .infinity) < 3000, "\(report)")
        if split.padding == 0 {
            #expect(report["handshake"] as? Bool == true && report["alpn"] as? String == "ptt/1-qx01", "\(report)")
        }
        #expect(relay.isRunning)
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
    }

    @Test func aClientHelloStreamedInOneByteRecordsIsClosedAndItsBytesAreNotKept() async throws {
        guard let python = TCPBadInputTests.python() else { return }
        let relay = try await startChildRelay(tcpOnly: true, events: false)
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        // The relay's peak resident memory (VmHWM) while the attacker sends (64 MiB at most) and then holds its
        // connection open for the rest of 3 s, against its memory before.
        let before = try #require(relay.residentKiBResettingPeak())
        let report = try await Self.runAttacker(
            python, port: address.port,
            ["--attack", "one-byte-records", "--seconds", "3", "--max-bytes", "\(64 << 20)"])
        let growth = try #require(relay.peakResidentKiB()) - before
        // Before: 64 MiB taken and kept (RSS +70 MB) until the handshake timeout, the connection still open at 3 s.
        #expect(report["closed_by_server"] as? Bool == true, "\(report)")
        #expect((report["elapsed_ms"] as? Double ?? .infinity) < 2000, "\(report)")
        #expect(growth < 16 * 1024, "the relay grew by \(growth) KiB: \(report)")
        #expect(relay.isRunning)
        try await TCPBadInputTests.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
    }
}
