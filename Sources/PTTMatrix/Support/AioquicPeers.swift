import ChildProcesses
import Foundation
import PTTTransport

/// aioquic on either side of a path: its client script run to completion in the client namespace, its echo server
/// started in the server namespace.
struct AioquicPeers: Sendable {
    let python: String
    let peers: String

    /// Finds Tests/Peers and a Python that imports aioquic (`.venv-peers/bin/python`, else `python3`).
    static func locate(packageRoot: String) async -> Result<AioquicPeers, MatrixError> {
        let peers = "\(packageRoot)/Tests/Peers"
        guard FileManager.default.isReadableFile(atPath: "\(peers)/aioquic_client.py") else {
            return .failure(MatrixError("\(peers)/aioquic_client.py not found: run from the package root"))
        }
        let venv = "\(packageRoot)/.venv-peers/bin/python"
        let python = FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/python3"
        let probe = try? await runProgram(python, ["-c", "import aioquic"], timeout: 20)
        guard let probe, !probe.signaled, probe.status == 0 else {
            return .failure(MatrixError("aioquic is not importable by \(python)"))
        }
        return .success(AioquicPeers(python: python, peers: peers))
    }

    /// What the client script printed: its JSON line, or its failure.
    struct ClientRun: Sendable {
        var ok: Bool
        var result: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        }
        var line: String
        var error: String

        func integer(_ key: String) -> Int { (result[key] as? NSNumber)?.intValue ?? 0 }
        func flag(_ key: String) -> Bool { (result[key] as? NSNumber)?.boolValue ?? false }
    }

    /// Runs the client script against `address` from the client namespace of `path`.
    func runClient(
        _ path: MatrixPath, _ address: ServerAddress, options: MatrixOptions, arguments: [String], timeout: Double = 20
    ) async throws -> ClientRun {
        let (executable, wrapped) = path.command(
            .client, python,
            [
                "\(peers)/aioquic_client.py", address.host, "\(address.port)", "--ca", options.certificateAuthority,
                "--timeout", "\(Int(timeout))",
            ] + arguments)
        let run = try await runProgram(executable, wrapped, timeout: timeout + 20)
        let line = run.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let error = run.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        return ClientRun(
            ok: !run.signaled && run.status == 0, line: line,
            error: error.isEmpty ? "exit status \(run.status)" : String(error.suffix(300)))
    }

    /// Starts the echo server in the server namespace of `path`.
    func startServer(_ path: MatrixPath, options: MatrixOptions, arguments: [String] = []) async throws -> ChildServer {
        let (executable, wrapped) = path.command(
            .server, python,
            [
                "\(peers)/aioquic_echo_server.py", "--host", path.serverHost, "--port", "0", "--cert",
                options.certificate, "--key", options.privateKey,
            ] + arguments)
        return try await ChildServer.start(executable, wrapped)
    }
}
