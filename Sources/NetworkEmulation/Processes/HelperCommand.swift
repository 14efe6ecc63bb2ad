internal import CNetworkEmulation
import Foundation
import Glibc
import TransportCore
import TransportIO

/// A short helper program (`ip`, `tc`) run to completion, for setting up and tearing down emulated paths. It is
/// started with `posix_spawn` and waited for directly, not through Foundation's `Process`, whose `run` crashed a
/// test process now and then (a fault inside `Process.run`, a `try!` on EINTR inside `FileHandle`).
package enum HelperCommand {
    /// What the program wrote to standard output and standard error (the first 64 KiB), and how it ended.
    package struct Outcome: Sendable {
        /// The exit status; 128 + the signal number when a signal ended it.
        package var status: Int32
        package var output: String
    }

    /// Runs `path` with `arguments` to completion.
    ///
    /// - Throws: `systemCallFailed` when it could not be started or waited for (missing program, no processes
    ///   left). A program that runs and fails is an `Outcome` with a non-zero status, not an error.
    package static func run(_ path: String, _ arguments: [String]) throws(TransportError) -> Outcome {
        let argv = CStrings([path] + arguments)
        defer { argv.free() }
        var buffer = [CChar](repeating: 0, count: 65536)
        var length = 0
        let status = buffer.withUnsafeMutableBufferPointer { out in
            ptt_run_command(path, argv.pointers, out.baseAddress, out.count, &length)
        }
        guard status >= 0 else {
            throw TransportError(
                .systemCallFailed, "cannot run \(path): \(errnoDescription(-status))", libraryCode: Int(-status))
        }
        let output = buffer.prefix(length).withUnsafeBufferPointer {
            String(decoding: UnsafeRawBufferPointer($0), as: UTF8.self)
        }
        return Outcome(status: status, output: output)
    }

    /// Runs it and returns its output; a non-zero exit throws `systemCallFailed` with the command line and output.
    @discardableResult
    package static func succeed(_ path: String, _ arguments: [String]) throws(TransportError) -> String {
        let outcome = try run(path, arguments)
        guard outcome.status == 0 else {
            throw TransportError(
                .systemCallFailed,
                "\(path) \(arguments.joined(separator: " ")) failed (status \(outcome.status)): "
                    + outcome.output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return outcome.output
    }
}
