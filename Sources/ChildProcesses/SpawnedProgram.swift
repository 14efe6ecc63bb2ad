import Foundation
import Glibc
import NetworkEmulation
import Synchronization
import TransportCore
import TransportIO

/// Another program, started with `posix_spawn` (through `ProgramSpawn`) and reaped here with `waitpid`: the one
/// way this package runs programs. Foundation's `Process` is not used: its `run` crashed a test process now and then
/// (a fault inside `Process.run`, 2 of 9 full suite runs), and a child whose exit never reached its reaper left
/// waits spinning.
///
/// The program starts with every signal at its default action and none blocked (a cooperative-pool thread blocks
/// SIGTERM, and a child inherits its spawner's mask), and with no descriptor of ours but the three it is given.
/// Released while it still runs, it is killed (SIGKILL) and reaped, and its pipes are closed.
package final class SpawnedProgram: Sendable {
    /// Where one of its output streams goes.
    package enum Output: Sendable {
        /// A pipe this object reads from (`output`, `errors`).
        case pipe
        /// /dev/null.
        case discard
        /// Appended to this file (created if missing).
        case file(String)
        /// Wherever its standard output goes (for `errors` only).
        case standardOutput
    }

    /// Its process ID: valid until it is reaped, so signal it only through `signal(_:)`.
    package let processIdentifier: pid_t
    /// The read end of its standard output pipe; -1 unless `output` was `.pipe`.
    package let output: Int32
    /// The read end of its standard error pipe; -1 unless `errors` was `.pipe`.
    package let errors: Int32
    /// The write end of its standard input pipe; -1 unless started with `input: true` (else it reads /dev/null).
    package let input: Int32
    /// Its wait status once reaped; -1 when it was reaped elsewhere (status unknown).
    private let reaped = Mutex<Int32?>(nil)
    /// Whether `closeInput()` closed `input` already.
    private let inputClosed = Mutex(false)

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: entries added to (or replacing) this process's environment.
    ///   - removing: names left out of the environment it inherits.
    ///   - directory: its working directory (nil: this process's).
    ///   - input: a pipe for its standard input (`input`), else /dev/null.
    /// - Throws: `ChildProcessError` when it cannot be started (the program is missing, no processes left).
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], removing: Set<String> = [],
        directory: String? = nil, input: Bool = false, output: Output = .pipe, errors: Output = .pipe
    ) throws(ChildProcessError) {
        var theirs: [Int32] = []  // the child's ends, closed here once it started (or failed to)
        var ours: [Int32] = []  // our ends, closed on failure
        defer { for fd in theirs { _ = close(fd) } }
        func pipePair() throws(ChildProcessError) -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else {
                throw ChildProcessError("cannot start \(executable): no pipe: \(String(cString: strerror(errno)))")
            }
            // Not inherited by programs started elsewhere (ours inherit nothing but 0-2 anyway).
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }
        func childEnd(_ destination: Output, sameAs: Int32) throws(ChildProcessError) -> (child: Int32, ours: Int32) {
            switch destination {
            case .discard: return (-1, -1)
            case .standardOutput: return (sameAs, -1)
            case .file(let path):
                let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
                guard fd >= 0 else {
                    let reason = String(cString: strerror(errno))
                    throw ChildProcessError("cannot start \(executable): cannot open \(path): \(reason)")
                }
                theirs.append(fd)
                return (fd, -1)
            case .pipe:
                let pair = try pipePair()
                theirs.append(pair.write)
                ours.append(pair.read)
                return (pair.write, pair.read)
            }
        }
        do throws(ChildProcessError) {
            var stdin: (child: Int32, ours: Int32) = (-1, -1)
            if input {
                let pair = try pipePair()
                theirs.append(pair.read)
                ours.append(pair.write)
                stdin = (pair.read, pair.write)
            }
            let stdout = try childEnd(output, sameAs: -1)
            let stderr = try childEnd(errors, sameAs: stdout.child)
            var environmentEntries: [String]?
            if !environment.isEmpty || !removing.isEmpty {
                environmentEntries = ProcessInfo.processInfo.environment.merging(environment) { $1 }
                    .filter { !removing.contains($0.key) }.map { "\($0.key)=\($0.value)" }
            }
            do throws(TransportError) {
                processIdentifier = try ProgramSpawn.start(
                    executable, arguments, environment: environmentEntries, directory: directory,
                    input: stdin.child, output: stdout.child, errors: stderr.child)
            } catch {
                throw ChildProcessError(error.message)
            }
            (self.input, self.output, self.errors) = (stdin.ours, stdout.ours, stderr.ours)
        } catch {
            for fd in ours { _ = close(fd) }
            throw error
        }
    }

    /// Whether it has not ended yet (reaps it when it has).
    package var isRunning: Bool { !reap(blocking: false) }

    /// Sends `number` unless it was reaped already (then its process ID may belong to another process).
    package func signal(_ number: Int32) {
        reaped.withLock { status in
            if status == nil { _ = kill(processIdentifier, number) }
        }
    }

    /// Waits at most `within` seconds for it to end; true when it did.
    @discardableResult
    package func wait(within: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(within)
        while isRunning {
            if Date() >= deadline { return false }
            usleep(5_000)
        }
        return true
    }

    /// SIGTERM, at most `within` seconds to exit, then SIGKILL; returns once it has ended. Blocks: call it from
    /// `onThread` (or a `defer` at the end of a test).
    package func terminate(within: TimeInterval, with first: Int32 = SIGTERM) {
        signal(first)
        if wait(within: within) { return }
        signal(SIGKILL)
        _ = reap(blocking: true)
    }

    /// Its exit status, or the signal number that ended it (`signaled`); -1 while it runs or when unknown.
    package var terminationStatus: Int32 {
        guard let status = reaped.withLock({ $0 }), status >= 0 else { return -1 }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Whether a signal ended it.
    package var signaled: Bool {
        guard let status = reaped.withLock({ $0 }), status >= 0 else { return false }
        return status & 0x7f != 0 && status & 0x7f != 0x7f
    }

    /// Closes its standard input (it then reads end of file).
    package func closeInput() {
        inputClosed.withLock { closed in
            if input >= 0 && !closed { close(input) }
            closed = true
        }
    }

    /// Everything left to read on `fd` (`output` or `errors`), up to end of file; blocks until the program and
    /// every program it started closed it.
    package func readToEnd(_ fd: Int32) -> Data { readRemaining(fd) }

    /// Reaps it if it ended (waiting for that when `blocking`); true once reaped.
    private func reap(blocking: Bool) -> Bool {
        reaped.withLock { status in
            if status != nil { return true }
            var raw: Int32 = 0
            while true {
                let rv = waitpid(processIdentifier, &raw, blocking ? 0 : WNOHANG)
                if rv == processIdentifier {
                    status = raw
                    return true
                }
                if rv == 0 { return false }
                if errno == EINTR { continue }
                status = -1  // ECHILD: not ours to reap any more; it is gone
                return true
            }
        }
    }

    deinit {
        signal(SIGKILL)
        _ = reap(blocking: true)
        for fd in [output, errors] where fd >= 0 { close(fd) }
        closeInput()
    }
}

/// Everything left to read on `fd`, up to end of file; a read interrupted by a signal is read again, any other
/// error ends the read with what came so far.
package func readRemaining(_ fd: Int32) -> Data {
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if count > 0 {
            data.append(contentsOf: buffer[0..<count])
        } else if count < 0 && errno == EINTR {
            continue
        } else {
            return data
        }
    }
}
