import Foundation

/// Runs the `ptt-transport` executable (built next to the test bundle) and other programs for end-to-end tests.
enum Subprocess {
    static var cli: String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("ptt-transport").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return "\(Fixtures.root)/.build/debug/ptt-transport"
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Ended by a signal (`status` is then the signal number), not by exiting.
        var signaled = false
    }

    /// Runs to completion (with a timeout) and captures the output. The wait happens on a thread of its own:
    /// blocking a cooperative-pool thread (two on this machine) would starve the in-process server under test.
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 60) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Swift.Result { try runBlocking(executable, arguments, timeout: timeout) })
            }
            .start()
        }
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], timeout: TimeInterval) throws -> Result
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            signaled: process.terminationReason == .uncaughtSignal)
    }

    /// A long-running program that prints `listening on HOST:PORT` when ready; stopped with SIGTERM.
    final class Server: @unchecked Sendable {
        // @unchecked Sendable: `process` and the pipes are set once in init and only read afterwards.
        let process = Process()
        let output = Pipe()
        let errors = Pipe()
        private(set) var address = ""

        init(_ executable: String, _ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            var line = Data()
            let handle = output.fileHandleForReading
            while true {
                let byte = handle.readData(ofLength: 1)
                if byte.isEmpty { break }
                if byte == Data("\n".utf8) { break }
                line.append(byte)
            }
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("listening on ") else {
                process.terminate()
                let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                throw NSError(
                    domain: "Subprocess", code: 1,
                    userInfo: [NSLocalizedDescriptionKey: "server did not start: \(text) \(stderr)"])
            }
            address = String(text.dropFirst("listening on ".count))
        }

        /// SIGTERM, then the exit status and whatever it printed after the first line.
        func stop() -> (status: Int32, output: String) {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(5_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (process.terminationStatus, rest)
        }
    }
}

/// Parses the one JSON object a command printed.
func jsonObject(_ text: String) -> [String: Any]? {
    guard let line = text.split(separator: "\n").last,
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { return nil }
    return object
}
