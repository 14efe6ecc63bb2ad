import Foundation

/// Where the `ptt-transport` executable the end-to-end tests run is (built next to the test bundle). Programs are run
/// with `ChildProcesses` (`runProgram`, `ChildServer`), the implementation the benchmark uses too.
enum Subprocess {
    static var cli: String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("ptt-transport").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return "\(Fixtures.root)/.build/debug/ptt-transport"
    }
}

/// Parses the one JSON object a command printed.
func jsonObject(_ text: String) -> [String: Any]? {
    guard let line = text.split(separator: "\n").last,
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { return nil }
    return object
}
