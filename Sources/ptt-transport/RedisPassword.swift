import CommandLineSupport
import Foundation

/// The Redis password of `serve --anti-replay`: the first line of `--anti-replay-password-file`, else the
/// environment's `PTT_REDIS_PASSWORD`, else none. Never a command-line value (it would show in the process list).
enum RedisPassword {
    static func load(file: String?) throws -> String? {
        if let file {
            guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8)
            else { throw Arguments.Failure(description: "--anti-replay-password-file \(file): cannot read the file") }
            let line = text.split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
            let password = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !password.isEmpty else {
                throw Arguments.Failure(description: "--anti-replay-password-file \(file): the first line is empty")
            }
            return password
        }
        let environment = ProcessInfo.processInfo.environment["PTT_REDIS_PASSWORD"]
        return environment?.isEmpty == false ? environment : nil
    }
}
