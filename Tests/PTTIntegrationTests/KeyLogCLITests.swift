import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// `connect --keylog-file` / `serve --keylog-file` and GnuTLS's own `SSLKEYLOGFILE`, through the CLI (the
/// environment variable is read once per process, so each case runs in a process of its own).
@Suite("Key logs from the command line", .integration)
struct KeyLogCLITests {
    static func secretLines(_ path: String) -> [Substring] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
    }

    @Test(arguments: ["quic", "tcp"])
    func sslKeyLogFileKeepsWorkingAndTheOptionTakesOver(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-keylog-cli-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let serverKeys = "\(directory)/server.keys"
        let server = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--keylog-file", serverKeys,
            ])
        defer { server.stopNow() }
        let environmentFile = "\(directory)/sslkeylogfile.keys"
        let optionFile = "\(directory)/option.keys"
        func connect(_ extra: [String]) async throws {
            let result = try await runProgram(
                Subprocess.cli,
                [
                    "connect", server.address, "--ca", Fixtures.ca, "--server-name", "localhost",
                    "--transport", transport,
                ] + extra, timeout: 30, environment: ["SSLKEYLOGFILE": environmentFile])
            #expect(result.status == 0, "\(result.stderr)")
        }
        // No --keylog-file: GnuTLS's default hook writes to SSLKEYLOGFILE.
        try await connect([])
        let fromEnvironment = Self.secretLines(environmentFile)
        #expect(fromEnvironment.contains { $0.hasPrefix("CLIENT_TRAFFIC_SECRET_0 ") })
        // --keylog-file: the secrets go there, and only there.
        try await connect(["--keylog-file", optionFile])
        #expect(Self.secretLines(optionFile).contains { $0.hasPrefix("CLIENT_TRAFFIC_SECRET_0 ") })
        #expect(Self.secretLines(environmentFile) == fromEnvironment)
        // The relay logged both sessions: one client random per connection.
        let randoms = Set(Self.secretLines(serverKeys).map { $0.split(separator: " ")[1] })
        #expect(randoms.count == 2)
    }
}
