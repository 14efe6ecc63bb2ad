import Foundation

/// How a program run to completion ended, and what it printed.
package struct ProgramResult: Sendable {
    /// The exit status, or the signal number when `signaled`.
    package var status: Int32
    /// Everything it wrote to standard output.
    package var stdout: String
    /// Everything it wrote to standard error.
    package var stderr: String
    /// Ended by a signal (`status` is then the signal number), not by exiting.
    package var signaled: Bool
}

/// Runs `executable` to completion, SIGTERM after `timeout` seconds, and captures its output. `environment`
/// entries are added to this process's environment. Never waits forever: a program still there 10 s after the
/// SIGTERM is killed and reported with status -1.
package func runProgram(
    _ executable: String, _ arguments: [String], timeout: TimeInterval = 60, environment: [String: String] = [:]
) async throws -> ProgramResult {
    let outcome = await onThread { () -> Result<ProgramResult, ChildProcessError> in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        do { try process.run() } catch { return .failure(ChildProcessError("cannot start \(executable): \(error)")) }
        // Drained while it runs, so a program that prints more than a pipe holds is not stuck.
        let stdout = Drain(out.fileHandleForReading)
        let stderr = Drain(err.fileHandleForReading)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning { process.terminate() }
        guard waitForExit(process) || !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)  // ignored SIGTERM, or its exit never reached Foundation
            return .success(
                ProgramResult(status: -1, stdout: "", stderr: "its exit status is unknown", signaled: false))
        }
        return .success(
            ProgramResult(
                status: process.terminationStatus, stdout: stdout.text(), stderr: stderr.text(),
                signaled: process.terminationReason == .uncaughtSignal))
    }
    return try outcome.get()
}

/// Reads a pipe to its end on a thread of its own.
private final class Drain: @unchecked Sendable {
    // @unchecked Sendable: `data` is written by the reader thread before `done` is signalled, read after.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            data = handle.readRemainingData()
            done.signal()
        }.start()
    }

    func text() -> String {
        done.wait()
        return String(decoding: data, as: UTF8.self)
    }
}
