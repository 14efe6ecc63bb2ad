import ChildProcesses
import Foundation
import TestSupport
import Testing

/// `serve --config FILE`: the same options as the command line, which wins; `--print-config` shows what is in
/// effect; a bad line is one error naming the file and its line number.
@Suite(.integration) struct ConfigFileTests {
    private func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-config-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func theFileServesAndTheCommandLineWins() async throws {
        let path = try file(
            """
            # a relay
            listen 127.0.0.1:0
            cert \(Fixtures.serverCert)
            key \(Fixtures.serverKey)

            admin 127.0.0.1:0
            relay-id from-file
            retry
            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let printed = try await runProgram(
            Subprocess.cli, ["serve", "--config", path, "--relay-id", "from-command-line", "--print-config"],
            timeout: 10)
        #expect(printed.status == 0, "\(printed.stderr)")
        let lines = Set(printed.stdout.split(separator: "\n").map(String.init))
        #expect(lines.contains("relay-id from-command-line") && lines.contains("retry"), "\(printed.stdout)")
        #expect(lines.contains("listen 127.0.0.1:0") && lines.contains("cert \(Fixtures.serverCert)"))
        #expect(!printed.stdout.contains("from-file") && !lines.contains { $0.hasPrefix("print-config") })
        // What it printed is a configuration file that reads back to the same.
        let again = try file(printed.stdout)
        defer { try? FileManager.default.removeItem(atPath: again) }
        let reprinted = try await runProgram(
            Subprocess.cli, ["serve", "--config", again, "--print-config"], timeout: 10)
        #expect(reprinted.stdout == printed.stdout)

        let relay = try await ChildServer.start(Subprocess.cli, ["serve", "--config", path])
        defer { relay.stopNow() }
        let admin = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        #expect(try adminGet(String(admin.dropFirst("admin on ".count)), "/readyz").status == 200)
    }

    @Test(arguments: [
        ("listen 127.0.0.1:0\nbogus 1\n", ":2: unknown option bogus"),
        ("listen 127.0.0.1:0\n\n# c\nretry yes\n", ":4: retry is a flag"),
        ("cert\n", ":1: cert needs a value"),
        ("--listen 127.0.0.1:0\n", ":1: write listen without dashes"),
        ("worker-of 12\n", ":1: worker-of cannot be set"),
    ])
    func aBadLineIsAnErrorNamingItsNumber(text: String, says: String) async throws {
        let path = try file(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await expectCLIRefuses(["serve", "--config", path], says: path + says)
    }

    @Test func aMissingOrBinaryFileIsRefused() async throws {
        try await expectCLIRefuses(["serve", "--config", "/nonexistent/relay.conf"], says: "cannot read the file")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-config-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: path, contents: Data([0xFF, 0xFE, 0x00, 0x80]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await expectCLIRefuses(["serve", "--config", path], says: "not UTF-8")
    }
}
