import Foundation
import TransportIO

/// A server the benchmark runs as a child process (the aioquic echo server, or this CLI's `serve` for the
/// per-side memory figures): started, awaited until it prints `listening on HOST:PORT`, stopped with SIGTERM.
/// Every wait is bounded, and blocking waits run on threads of their own, never on the cooperative pool.
final class ChildProcess: Sendable {
    /// The address from the `listening on` line.
    let address: String
    private let process: Process
    private let output: Pipe
    private let errors: Pipe
    private let stopped = Locked(false)

    var processIdentifier: Int32 { process.processIdentifier }

    private init(process: Process, output: Pipe, errors: Pipe, address: String) {
        self.process = process
        self.output = output
        self.errors = errors
        self.address = address
    }

    /// Starts `executable` and waits (at most `readyWithin`) for its `listening on HOST:PORT` line.
    static func start(
        _ executable: String, _ arguments: [String], readyWithin: Duration = .seconds(15)
    )
        async throws -> ChildProcess
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do { try process.run() } catch {
            throw BenchError("cannot start \(executable): \(error)")
        }
        // If the line does not come in time, kill the child: its pipe closes and the reader returns.
        let (seconds, attoseconds) = readyWithin.components
        let watchdog = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(
            deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18, execute: watchdog)
        let line = await onThread { readLine(output.fileHandleForReading) }
        watchdog.cancel()
        guard line.hasPrefix("listening on ") else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            let stderr = await onThread {
                process.waitUntilExit()
                return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            }
            let said = [line, stderr].joined(separator: " ").trimmingCharacters(in: .whitespacesAndNewlines)
            throw BenchError(
                "\(URL(fileURLWithPath: executable).lastPathComponent) did not start"
                    + (said.isEmpty ? " within \(readyWithin)" : ": \(said)"))
        }
        return ChildProcess(
            process: process, output: output, errors: errors,
            address: String(line.dropFirst("listening on ".count)))
    }

    /// SIGTERM, at most `within` to exit, then SIGKILL; returns what it printed after the first line.
    @discardableResult
    func stop(within: TimeInterval = 5) async -> String {
        guard
            stopped.withLock({ done in
                defer { done = true }
                return !done
            })
        else { return "" }
        let process = self.process
        let output = self.output
        return await onThread {
            if process.isRunning { process.terminate() }
            let deadline = Date().addingTimeInterval(within)
            while process.isRunning && Date() < deadline { usleep(5_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
    }

    /// The child's resident set (VmRSS) in KiB, or nil once it is gone.
    func residentKiB() -> Int? { ResidentMemory.kib(ofProcess: "\(process.processIdentifier)") }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
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

/// Runs a blocking `body` on a thread of its own and returns its result to the awaiting task.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// VmRSS from /proc/<pid>/status.
enum ResidentMemory {
    /// `process` is a pid or `self`; nil when the file cannot be read.
    static func kib(ofProcess process: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8) else { return nil }
        return kib(fromStatus: status)
    }

    /// Parses the `VmRSS:   1234 kB` line.
    static func kib(fromStatus status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").dropFirst().lazy.compactMap { Int($0) }.first
        }
        return nil
    }
}
