import Foundation
import Glibc
import Synchronization
import TransportCore

/// A server run as a child process: started and awaited until it prints `listening on HOST:PORT`, then stopped
/// with SIGTERM (SIGKILL if it does not exit in time). Killed if it is still running when released.
package final class ChildServer: Sendable {
    /// The address from the `listening on` line.
    package let address: String
    private let program: SpawnedProgram
    /// Output `line(startingWith:)` read past the line it returned: the start of the next call's search.
    private let unread = Mutex<[UInt8]>([])
    /// What `errorLine(containing:within:)` read of stderr so far (`errorOutput` starts with it).
    private let errorsRead = Mutex<[UInt8]>([])

    private init(program: SpawnedProgram, address: String) {
        self.program = program
        self.address = address
    }

    /// Starts `executable` and waits (at most `readyWithin`) for its `listening on HOST:PORT` line.
    ///
    /// - Throws: `ChildProcessError` with what it printed when it cannot start or says something else first.
    package static func start(
        _ executable: String, _ arguments: [String], readyWithin: Duration = .seconds(15)
    ) async throws -> ChildServer {
        let program = try SpawnedProgram(executable, arguments)
        // If the line does not come in time, kill the child: its pipe closes and the reader returns. The reader's
        // thread settles the race as it reads the line, not when the awaiting task resumes: on a loaded machine the
        // task may resume seconds later, and a watchdog firing meanwhile would kill a child that was ready.
        let outcome = Locked(StartOutcome.waiting)
        let (seconds, attoseconds) = readyWithin.components
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18) {
            if outcome.settle(.timedOut) { program.signal(SIGKILL) }
        }
        let line = await onThread {
            let line = readLine(from: program.output)
            _ = outcome.settle(.read)
            return line
        }
        guard line.hasPrefix("listening on "), outcome.withLock({ $0 }) == .read else {
            let stderr = await onThread {
                program.signal(SIGKILL)
                program.wait(within: 10)
                return String(decoding: program.readToEnd(program.errors), as: UTF8.self)
            }
            let said = [line, stderr].joined(separator: " ").trimmingCharacters(in: .whitespacesAndNewlines)
            throw ChildProcessError(
                "\(URL(fileURLWithPath: executable).lastPathComponent) did not start"
                    + (said.isEmpty ? " within \(readyWithin)" : ": \(said)"))
        }
        return ChildServer(program: program, address: String(line.dropFirst("listening on ".count)))
    }

    /// Its process ID.
    package var processIdentifier: Int32 { program.processIdentifier }
    /// Whether it is still running.
    package var isRunning: Bool { program.isRunning }
    /// Its exit status (or signal number) once it ended.
    package var terminationStatus: Int32 { program.terminationStatus }

    /// SIGINT (a relay exits at once; SIGTERM would drain it, waiting for its clients), at most `within` seconds to
    /// exit, then SIGKILL; returns the exit status and what it printed after the first line. A second call returns
    /// at once with what is left.
    @discardableResult
    package func stop(within: TimeInterval = 5) async -> (status: Int32, output: String) {
        await onThread { [self] in stopNow(within: within) }
    }

    /// `stop(within:)` on the calling thread, for a `defer` at the end of a test. Blocks for up to `within`.
    @discardableResult
    package func stopNow(within: TimeInterval = 5) -> (status: Int32, output: String) {
        program.terminate(within: within, with: SIGINT)
        return (
            program.terminationStatus,
            String(decoding: unread.withLock { $0 } + program.readToEnd(program.output), as: UTF8.self)
        )
    }

    /// What it wrote on stderr, read to the end: call it once it has exited (it blocks until then).
    package func errorOutput() -> String {
        String(decoding: errorsRead.withLock { $0 } + program.readToEnd(program.errors), as: UTF8.self)
    }

    /// Reads its stderr until it holds a whole line containing `text` and returns that line; nil if none came
    /// within `limit` or it ended. Polls the pipe, so no thread blocks. What was read stays in `errorOutput()`, and
    /// each call searches stderr from its start. Call it from one task at a time.
    package func errorLine(containing text: String, within limit: Duration) async -> String? {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while true {
            let read = errorsRead.withLock { $0 }
            if let end = read.lastIndex(of: UInt8(ascii: "\n")),
                let line = String(decoding: read[..<end], as: UTF8.self).split(separator: "\n").first(where: {
                    $0.contains(text)
                })
            {
                return String(line)
            }
            guard let bytes = await Self.bytes(from: program.errors, before: deadline) else { return nil }
            errorsRead.withLock { $0 += bytes }
        }
    }

    /// Ends it with SIGKILL at once (a crash, as far as the program can tell).
    package func kill() {
        program.signal(SIGKILL)
        program.wait(within: 10)
    }

    /// Reads its output up to the first line starting with `prefix` and returns that line; nil if none came within
    /// `limit` or it ended. Polls the pipe, so no thread blocks. Lines before the one returned are skipped (not in
    /// `stop`'s output); what was read after it is kept for the next call, so two lines printed together are both
    /// found. Call it from one task at a time.
    package func line(startingWith prefix: String, within limit: Duration) async -> String? {
        let deadline = ContinuousClock.now.advanced(by: limit)
        var pending = unread.withLock { bytes in
            defer { bytes = [] }
            return bytes
        }
        defer { unread.withLock { [pending] in $0 = pending + $0 } }
        while true {
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if line.hasPrefix(prefix) { return line }
            }
            guard let bytes = await Self.bytes(from: program.output, before: deadline) else { return nil }
            pending += bytes
        }
    }

    /// What one read of the pipe `fd` gives once it has bytes, polled every 10 ms (no thread blocks); nil at its
    /// end, or once `deadline` passed with nothing to read.
    private static func bytes(from fd: Int32, before deadline: ContinuousClock.Instant) async -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            let count = read(fd, &buffer, buffer.count)
            return count > 0 ? Array(buffer[..<count]) : nil
        }
        return nil
    }

    /// Its resident set (VmRSS) in KiB, or nil once it is gone.
    package func residentKiB() -> Int? { ResidentMemory.kib(ofProcess: "\(program.processIdentifier)") }

    /// The child's peak resident set (VmHWM) in KiB, or nil once it has exited.
    package func peakResidentKiB() -> Int? { ResidentMemory.peakKiB(ofProcess: "\(program.processIdentifier)") }

    /// The child's resident set now, after making it the peak from which `peakResidentKiB` counts again (writing 5
    /// to /proc/PID/clear_refs), so a measurement's peak excludes start-up's; nil once the child has exited.
    package func residentKiBResettingPeak() -> Int? {
        ResidentMemory.resetPeak(ofProcess: "\(program.processIdentifier)")
        return residentKiB()
    }

}

/// Reads `fd` a byte at a time up to a newline or end of file (nothing past the line is taken from the pipe), and
/// returns the line without its newline. Blocks: call it from `onThread`.
package func readLine(from fd: Int32) -> String {
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while true {
        let count = read(fd, &byte, 1)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 || byte == UInt8(ascii: "\n") { break }
        line.append(byte)
    }
    return String(decoding: line, as: UTF8.self)
}

/// Who ended the wait for a child's first line: the reader (it read a line, or the pipe closed) or the watchdog.
private enum StartOutcome {
    case waiting, read, timedOut
}

extension Locked where Value == StartOutcome {
    /// Ends the wait as `outcome` unless it already ended; true when this call ended it.
    fileprivate func settle(_ outcome: StartOutcome) -> Bool {
        withLock { state in
            guard state == .waiting else { return false }
            state = outcome
            return true
        }
    }
}
