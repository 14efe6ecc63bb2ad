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
/// SIGTERM is killed (reported as killed by signal 9).
package func runProgram(
    _ executable: String, _ arguments: [String], timeout: TimeInterval = 60, environment: [String: String] = [:]
) async throws -> ProgramResult {
    let outcome = await onThread { () -> Result<ProgramResult, ChildProcessError> in
        let program: SpawnedProgram
        do throws(ChildProcessError) {
            program = try SpawnedProgram(executable, arguments, environment: environment)
        } catch {
            return .failure(error)
        }
        // Drained while it runs, so a program that prints more than a pipe holds is not stuck.
        let stdout = Drain(program, program.output)
        let stderr = Drain(program, program.errors)
        if !program.wait(within: timeout) {
            program.terminate(within: 10)
            if program.terminationStatus < 0 {
                return .success(
                    ProgramResult(status: -1, stdout: "", stderr: "its exit status is unknown", signaled: false))
            }
        }
        return .success(
            ProgramResult(
                status: program.terminationStatus, stdout: stdout.text(), stderr: stderr.text(),
                signaled: program.signaled))
    }
    return try outcome.get()
}

/// Reads a pipe to its end on a thread of its own.
private final class Drain: @unchecked Sendable {
    // @unchecked Sendable: `data` is written by the reader thread before `done` is signalled, read after.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ program: SpawnedProgram, _ fd: Int32) {
        Thread { [self] in
            data = program.readToEnd(fd)
            done.signal()
        }.start()
    }

    func text() -> String {
        done.wait()
        return String(decoding: data, as: UTF8.self)
    }
}
