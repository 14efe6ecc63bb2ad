import CommandLineSupport
import Foundation
import PTTFuzz

/// `ptt-lab fuzz`: seeded fuzzing of every parser, the CLI and a live relay (see PTTFuzz).
enum FuzzCommand {
    static let usage = """
        usage: ptt-lab fuzz [--iterations N] [--seed S] [--json] [--certs DIR]
          N inputs in total (default 100000) across the parsers, the CLI, a child relay's UDP and TCP sockets and
          the relay's Redis client against a hostile Redis;
          exits 1 when anything crashed, the relay stopped serving, or inputs could not be delivered.
        """

    static func run(_ raw: [String]) async throws {
        let args = try Arguments(raw, options: ["iterations", "seed", "certs"], flags: ["json"])
        guard args.positionals.isEmpty else {
            throw Arguments.Failure(description: "unexpected \(args.positionals[0])")
        }
        var options = FuzzOptions()
        options.iterations = try args.integer("iterations", default: 100_000)
        guard options.iterations > 0 else { throw Arguments.Failure(description: "--iterations must be at least 1") }
        guard let seed = UInt64(args.value("seed") ?? "1") else {
            throw Arguments.Failure(description: "--seed takes a whole number from 0 to 2^64-1")
        }
        options.seed = seed
        options.certificates = Certificates(directory: args.value("certs") ?? "certs")
        options.executable = try LabExecutables.relay()
        let interactive = isatty(2) != 0
        options.progress = { line in
            let text = interactive ? "\r\u{1b}[K\(line)" : "\(line)\n"
            FileHandle.standardError.write(Data(text.utf8))
        }
        let report = try await Fuzz.run(options)
        if interactive { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
        print(args.flag("json") ? report.json() : report.table())
        if !report.isClean {
            fflush(nil)
            exit(1)
        }
    }
}
