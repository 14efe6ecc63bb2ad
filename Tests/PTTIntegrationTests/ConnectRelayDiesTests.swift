import ChildProcesses
import Foundation
import TestSupport
import Testing

/// `ptt-transport connect --datagrams N` whose relay dies mid-call exits 1 with one line on stderr, instead of
/// printing a result with fewer echoes and exiting 0.
@Suite("connect reports a relay that died mid-call", .serialized, .integration)
struct ConnectRelayDiesTests {
    /// A 9 s call at a voice cadence; `--timeout 2` bounds the relay's silence.
    static func call(_ port: UInt16) -> [String] {
        [
            "connect", "127.0.0.1:\(port)", "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic",
            "--json", "--datagrams", "450", "--interval", "20", "--timeout", "2",
        ]
    }

    static func serve(_ directory: URL, port: UInt16) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--reset-secret", directory.appendingPathComponent("reset.key").path, "--events",
            ])
    }

    /// Runs the call, waits until the relay echoed some of its audio, then `interrupt`s the relay.
    static func interruptedCall(
        port: UInt16, relay: ChildServer, interrupt: () async throws -> Void
    ) async throws -> ProgramResult {
        async let run = runProgram(Subprocess.cli, call(port), timeout: 30)
        #expect(await relay.line(startingWith: ConnectKeepTests.datagramLine, within: .seconds(10)) != nil)
        try await interrupt()
        return try await run
    }

    static func expectOneLineFailure(_ result: ProgramResult, saying text: String) {
        #expect(!result.signaled && result.status == 1, "exit \(result.status): \(result.stdout) \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("ended before the call finished"), "\(result.stderr)")
        #expect(result.stderr.contains(text), "\(result.stderr)")
        #expect(!result.stdout.contains("datagrams_echoed"), "\(result.stdout)")
    }

    @Test func aKilledRelayEndsTheCallWithAnIdleTimeout() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (port, relay) = try await StablePort.first { port in (port, try await Self.serve(directory, port: port)) }
        defer { relay.kill() }
        let result = try await Self.interruptedCall(port: port, relay: relay) { relay.kill() }
        Self.expectOneLineFailure(result, saying: "idle-timeout")
    }

    @Test func aRestartedRelayResetsTheCall() async throws {
        // The restarted relay (same port, same reset secret) no longer knows the connection and answers its next
        // packet with a stateless reset.
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (port, relay) = try await StablePort.first { port in (port, try await Self.serve(directory, port: port)) }
        defer { relay.kill() }
        var restarted: ChildServer?
        defer { restarted?.kill() }
        let result = try await Self.interruptedCall(port: port, relay: relay) {
            relay.kill()
            restarted = try await Self.serve(directory, port: port)
        }
        Self.expectOneLineFailure(result, saying: "connection-reset")
        // The restarted relay serves the next call.
        let next = try await runProgram(
            Subprocess.cli,
            ["connect", "127.0.0.1:\(port)", "--ca", Fixtures.ca, "--server-name", "localhost", "--json"])
        #expect(next.status == 0, "\(next.stderr)")
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-dies-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }
}
