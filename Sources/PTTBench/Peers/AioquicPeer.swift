import ChildProcesses
import Foundation

/// The aioquic echo server (`Tests/Peers/aioquic_echo_server.py`) as the benchmark's side-by-side peer: where the
/// script and a Python with aioquic are, and how to start it on the relay's side of the path.
struct AioquicPeer: Sendable {
    let python: String
    let script: String

    /// The scenarios that also run against aioquic.
    static let scenarios: Set<String> = ["quic-full", "quic-resumed", "quic-0rtt", "capacity-datagrams"]

    /// Finds the script under `packageRoot` and a Python that imports aioquic (`.venv-peers/bin/python` under the
    /// root, else `python3`). Returns the peer, or why it cannot run.
    static func locate(packageRoot: String) async -> Result<AioquicPeer, BenchError> {
        let script = "\(packageRoot)/Tests/Peers/aioquic_echo_server.py"
        guard FileManager.default.isReadableFile(atPath: script) else {
            return .failure(BenchError("\(script) not found (run from the package root or pass --package-root)"))
        }
        let venv = "\(packageRoot)/.venv-peers/bin/python"
        let python = FileManager.default.isExecutableFile(atPath: venv) ? venv : "python3"
        guard await imports(python) else {
            return .failure(
                BenchError(
                    "aioquic is not installed for \(python) (`\(python) -c \"import aioquic\"` "
                        + "failed); install it, e.g. in .venv-peers, to compare"))
        }
        return .success(AioquicPeer(python: python, script: script))
    }

    /// Whether `python -c "import aioquic"` succeeds within 20 s.
    private static func imports(_ python: String) async -> Bool {
        guard let result = try? await runProgram("/usr/bin/env", [python, "-c", "import aioquic"], timeout: 20)
        else { return false }
        return !result.signaled && result.status == 0
    }

    /// Starts the echo server on the relay's side of `environment` (inside the server namespace when emulated).
    /// `countDatagrams`: count datagrams instead of echoing them, and print the count when stopped.
    func start(
        _ options: BenchOptions, _ environment: BenchEnvironment, countDatagrams: Bool = false
    )
        async throws -> ChildServer
    {
        var arguments = [
            script, "--host", environment.serverHost, "--port", "0",
            "--cert", options.certificate, "--key", options.privateKey,
        ]
        if countDatagrams { arguments.append("--count-datagrams") }
        let (executable, wrapped) = environment.serverSideCommand("/usr/bin/env", [python] + arguments)
        return try await ChildServer.start(executable, wrapped)
    }
}
