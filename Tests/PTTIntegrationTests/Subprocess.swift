import ChildProcesses
import Foundation
import Testing

/// Where the executables the end-to-end tests run are (built next to the test bundle): the operator's `ptt-transport`
/// (`PTT_CLI` names another, e.g. a release build for a measurement) and the lab's `ptt-lab`. Programs are run with
/// `ChildProcesses` (`runProgram`, `ChildServer`), the implementation the benchmark uses too.
enum Subprocess {
    static var cli: String {
        if let chosen = ProcessInfo.processInfo.environment["PTT_CLI"], !chosen.isEmpty { return chosen }
        return executable("ptt-transport")
    }
    static var lab: String { executable("ptt-lab") }

    private static func executable(_ name: String) -> String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return "\(Fixtures.root)/.build/debug/\(name)"
    }
}

/// `ptt-transport serve` in a child process on loopback with the test certificates: QUIC and TCP on one port, or TCP
/// alone (`tcpOnly`); `--events` (the echo relay's event lines on stdout) unless `events` is false. Default limits
/// otherwise (the 10 s handshake timeout, per-source budgets).
func startChildRelay(tcpOnly: Bool = false, events: Bool = true, _ more: [String] = []) async throws -> ChildServer {
    let listen = tcpOnly ? ["--no-udp", "--tcp-listen", "127.0.0.1:0"] : ["--listen", "127.0.0.1:0"]
    return try await ChildServer.start(
        Subprocess.cli,
        ["serve"] + listen + ["--cert", Fixtures.serverCert, "--key", Fixtures.serverKey] + (events ? ["--events"] : [])
            + more
    )
}

/// Runs the CLI with `arguments` and expects the refusal of a bad value: exit 1 (no signal), exactly one line on
/// stderr containing `says`, and no "listening on" (it refused before binding or connecting anything).
func expectCLIRefuses(_ arguments: [String], says: String, program: String = Subprocess.cli) async throws {
    let result = try await runProgram(program, arguments, timeout: 10)
    #expect(!result.signaled && result.status == 1, "\(result.status): \(result.stderr)")
    #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
    #expect(result.stderr.contains(says), "\(result.stderr)")
    #expect(!result.stdout.contains("listening on"))
}

/// Parses the one JSON object a command printed.
func jsonObject(_ text: String) -> [String: Any]? {
    guard let line = text.split(separator: "\n").last,
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { return nil }
    return object
}

/// Runs `connect` to `relay` twice with one session file in `directory` (the second resumes, offering 0-RTT when
/// its ticket allows) and expects the first to succeed: the second run's result, whose `early_data` says whether
/// the relay accepted it.
func coldThenWarmConnect(_ relay: ChildServer, directory: URL) async throws -> ProgramResult {
    let session = directory.appendingPathComponent("session").path
    let connect = ["connect", relay.address, "--ca", Fixtures.ca, "--session-file", session, "--json"]
    let cold = try await runProgram(Subprocess.cli, connect)
    #expect(cold.status == 0, "\(cold.stderr)")
    return try await runProgram(Subprocess.cli, connect)
}
