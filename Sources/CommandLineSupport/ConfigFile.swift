import Foundation

/// A command's options from a file (`serve --config FILE`), one per line with the command line's names:
/// `option value` (the value is the rest of the line, spaces included), a flag's name alone, `#` comments and blank
/// lines ignored. Options given on the command line win over the file's (they come after them).
public enum ConfigFile {
    /// The file's lines as command-line arguments (`--option`, `value`), checked against the command's names.
    ///
    /// - Throws: ``Arguments/Failure`` naming the file and line number: unreadable file, unknown option, a value
    ///   missing or given to a flag, or an option the file may not hold (`refused`).
    public static func arguments(
        _ path: String, options valued: Set<String>, flags known: Set<String>, refused: Set<String> = []
    ) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Arguments.Failure(description: "--config \(path): cannot read the file")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw Arguments.Failure(description: "--config \(path): not UTF-8 text")
        }
        return try arguments(text: text, path: path, options: valued, flags: known, refused: refused)
    }

    /// `arguments(_:options:flags:refused:)` on text already read (`path` names it in errors).
    public static func arguments(
        text: String, path: String, options valued: Set<String>, flags known: Set<String>, refused: Set<String> = []
    ) throws -> [String] {
        var result: [String] = []
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces.union(.init(charactersIn: "\r")))
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let fail = { (why: String) in Arguments.Failure(description: "\(path):\(offset + 1): \(why)") }
            let name = String(line.prefix { !$0.isWhitespace })
            let value = line.dropFirst(name.count).trimmingCharacters(in: .whitespaces)
            guard !name.hasPrefix("-") else { throw fail("write \(name.drop { $0 == "-" }) without dashes") }
            guard !refused.contains(name) else { throw fail("\(name) cannot be set in a configuration file") }
            if valued.contains(name) {
                guard !value.isEmpty else { throw fail("\(name) needs a value") }
                result += ["--\(name)", value]
            } else if known.contains(name) {
                guard value.isEmpty else { throw fail("\(name) is a flag: write it alone, without \(value)") }
                result.append("--\(name)")
            } else {
                throw fail("unknown option \(name)")
            }
        }
        return result
    }

    /// The options in effect as a configuration file's lines, sorted, that `arguments` reads back to the same;
    /// the names in `leaving` are left out.
    public static func text(_ arguments: Arguments, leaving: Set<String> = []) -> String {
        arguments.effective.filter { !leaving.contains($0.name) }.map { entry in
            entry.value.map { "\(entry.name) \($0)" } ?? entry.name
        }
        .joined(separator: "\n") + "\n"
    }
}
