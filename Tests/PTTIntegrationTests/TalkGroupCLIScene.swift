import ChildProcesses
import Foundation
import TestSupport
import Testing

/// The talk-group relay of the CLI tests as a child process (`serve --talk-groups`, with a `--wake-exec` hook unless
/// told otherwise) and its phones' command lines: a temporary directory holds the ticket key, the wake hook's output
/// and the phones' sessions; bob is the listener with a push token who suspends and is woken through the hook.
struct TalkGroupCLIScene {
    let directory: URL
    /// Where the hook appends the JSON object of each wake.
    let hookFile: String
    /// bob's session file.
    let session: String

    init(_ label: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        hookFile = directory.appendingPathComponent("hook.json").path
        session = directory.appendingPathComponent("bob.session").path
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// The relay. With `wakeHook`, its hook is a shell command that starts by appending its input to `hookFile`
    /// (`then` runs after); without, it runs no hook.
    func startRelay(
        wakeHook: Bool = true, hookThen then: String = "", _ more: [String] = []
    ) async throws
        -> ChildServer
    {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path, "--talk-groups",
            ] + (wakeHook ? ["--wake-exec", "cat >> '\(hookFile)'\(then)"] : []) + more)
    }

    /// `connect` to `relay` in `group` with `--json` (and `--transport` when given).
    func phone(_ relay: ChildServer, transport: String? = nil, group: String = "dispatch") -> [String] {
        ["connect", relay.address, "--ca", Fixtures.ca, "--server-name", "localhost"]
            + (transport.map { ["--transport", $0] } ?? []) + ["--group", group, "--json"]
    }

    /// A session file for `user` in the scene's directory.
    func session(of user: String) -> String { directory.appendingPathComponent("\(user).session").path }

    /// The UDP/TCP port `relay` listens on, for the library's phones.
    static func port(of relay: ChildServer) throws -> UInt16 {
        try #require(relay.address.split(separator: ":").last.flatMap { UInt16($0) })
    }

    /// bob's identity, push token and session.
    var bob: [String] { ["--user", "bob", "--push-token", "b0b", "--session-file", session] }

    /// The hook's first wake, once it wrote its whole line.
    func firstWake() async throws -> [String: Any] {
        #expect(
            await eventually {
                (try? String(contentsOfFile: hookFile, encoding: .utf8))?.hasSuffix("\n") == true
            })
        return try #require(jsonObject(try String(contentsOfFile: hookFile, encoding: .utf8)))
    }
}
