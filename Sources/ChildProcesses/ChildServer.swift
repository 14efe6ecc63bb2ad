import Foundation
import Glibc
import Synchronization

/// A server run as a child process: started and awaited until it prints `listening on HOST:PORT`, then stopped
/// with SIGTERM (SIGKILL if it does not exit in time). Killed if it is still running when released.
package final class ChildServer: Sendable {
    /// The address from the `listening on` line.
    package let address: String
    private let process: Process
    private let output: Pipe
    private let errors: Pipe
    /// Output `line(startingWith:)` read past the line it returned: the start of the next call's search.
    private let unread = Mutex<[UInt8]>([])

    private init(process: Process, output: Pipe, errors: Pipe, address: String) {
        self.process = process
        self.output = output
        self.errors = errors
        self.address = address
    }

    /// Starts `executable` and waits (at most `readyWithin`) for its `listening on HOST:PORT` line.
    ///
    /// - Throws: `ChildProcessError` with what it printed when it cannot start or says something else first.
    package static func start(
        _ executable: String, _ arguments: [String], readyWithin: Duration = .seconds(15)
    ) async throws -> ChildServer {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do { try process.run() } catch {
            throw ChildProcessError("cannot start \(executable): \(error)")
        }
        // If the line does not come in time, kill the child: its pipe closes and the reader returns.
        let (seconds, attoseconds) = readyWithin.components
        let watchdog = DispatchWorkItem { if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(
            deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18, execute: watchdog)
        let line = await onThread { readLine(output.fileHandleForReading) }
        watchdog.cancel()
        guard line.hasPrefix("listening on ") else {
            if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
            let stderr = await onThread {
                waitForExit(process)
                return String(decoding: errors.fileHandleForReading.readRemainingData(), as: UTF8.self)
            }
            let said = [line, stderr].joined(separator: " ").trimmingCharacters(in: .whitespacesAndNewlines)
            throw ChildProcessError(
                "\(URL(fileURLWithPath: executable).lastPathComponent) did not start"
                    + (said.isEmpty ? " within \(readyWithin)" : ": \(said)"))
        }
        return ChildServer(
            process: process, output: output, errors: errors,
            address: String(line.dropFirst("listening on ".count)))
    }

    /// Its process ID.
    package var processIdentifier: Int32 { process.processIdentifier }
    /// Whether it is still running.
    package var isRunning: Bool { process.isRunning }
    /// Its exit status (or signal number) once it ended.
    package var terminationStatus: Int32 { process.terminationStatus }

    /// SIGTERM, at most `within` seconds to exit, then SIGKILL; returns the exit status and what it printed after
    /// the first line. A second call returns at once with what is left.
    @discardableResult
    package func stop(within: TimeInterval = 5) async -> (status: Int32, output: String) {
        await onThread { [self] in stopNow(within: within) }
    }

    /// `stop(within:)` on the calling thread, for a `defer` at the end of a test. Blocks for up to `within`.
    @discardableResult
    package func stopNow(within: TimeInterval = 5) -> (status: Int32, output: String) {
        terminate(process, within: within)
        return (
            process.isRunning ? -1 : process.terminationStatus,
            String(
                decoding: unread.withLock { $0 } + output.fileHandleForReading.readRemainingData(),
                as: UTF8.self)
        )
    }

    /// Ends it with SIGKILL at once (a program started from a thread whose signal mask blocks SIGTERM never sees
    /// `stop`'s SIGTERM).
    package func kill() {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGKILL) }
        waitForExit(process)
    }

    /// Reads its output up to the first line starting with `prefix` and returns that line; nil if none came within
    /// `limit` or it ended. Polls the pipe, so no thread blocks. Lines before the one returned are skipped (not in
    /// `stop`'s output); what was read after it is kept for the next call, so two lines printed together are both
    /// found. Call it from one task at a time.
    package func line(startingWith prefix: String, within limit: Duration) async -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        var pending = unread.withLock { bytes in
            defer { bytes = [] }
            return bytes
        }
        defer { unread.withLock { [pending] in $0 = pending + $0 } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                if line.hasPrefix(prefix) { return line }
            }
            guard clock.now < deadline else { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { return nil }
            pending += buffer[..<count]
        }
    }

    /// Its resident set (VmRSS) in KiB, or nil once it is gone.
    package func residentKiB() -> Int? { ResidentMemory.kib(ofProcess: "\(process.processIdentifier)") }

    /// The child's peak resident set (VmHWM) in KiB, or nil once it has exited.
    package func peakResidentKiB() -> Int? { ResidentMemory.peakKiB(ofProcess: "\(process.processIdentifier)") }

    /// The child's resident set now, after making it the peak from which `peakResidentKiB` counts again (writing 5
    /// to /proc/PID/clear_refs), so a measurement's peak excludes start-up's; nil once the child has exited.
    package func residentKiBResettingPeak() -> Int? {
        ResidentMemory.resetPeak(ofProcess: "\(process.processIdentifier)")
        return residentKiB()
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }

    private static func readLine(_ handle: FileHandle) -> String {
        var line = Data()
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }
}
