import Testing

@testable import PTTFuzz

/// The CLI target feeds `--keylog-file` and `--qlog-dir` to `serve` and `connect`, and whatever its mutations do,
/// the values the CLI would take for them stay inside the scratch directory's `out` directory.
@Suite struct CLIOutputPathTests {
    let target = CLITarget(
        executable: "/nonexistent", certificates: Certificates(directory: "/scratch"), scratch: "/scratch",
        relayPort: 1)

    /// Every value the CLI's parser could take for `option`: the argument after `--option`, and `--option=VALUE`.
    func values(of option: String, in arguments: [String]) -> [String] {
        var found: [String] = []
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--\(option)", index + 1 < arguments.count {
                found.append(arguments[index + 1])
                index += 1
            } else if argument.hasPrefix("--\(option)=") {
                found.append(String(argument.dropFirst(option.count + 3)))
            }
            index += 1
        }
        return found
    }

    @Test func generatedOutputPathsStayInTheOutDirectory() {
        var random = FuzzRandom(seed: 7)
        var fed: [String: Int] = [:]
        for _ in 0..<20_000 {
            let arguments = target.nextArguments(&random)
            for option in CLITarget.outputOptions {
                for value in values(of: option, in: arguments) {
                    fed[option, default: 0] += 1
                    #expect(
                        value.isEmpty
                            || ((value == "/scratch/out" || value.hasPrefix("/scratch/out/")) && !value.contains("..")),
                        "--\(option) \(value) in \(arguments)")
                }
            }
        }
        #expect(fed["keylog-file", default: 0] > 0 && fed["qlog-dir", default: 0] > 0, "both options fed: \(fed)")
    }

    @Test func mutatedListsCannotPointAnOutputAtACertificate() {
        let arguments = target.confineOutputs([
            "serve", "--keylog-file", "/scratch/server.pem", "--qlog-dir=/scratch", "--keylog-file=",
            "--qlog-dir", "/scratch/out/../server.key", "--keylog-file=relative", "--cert", "/scratch/out/x",
        ])
        #expect(
            arguments == [
                "serve", "--keylog-file", "/scratch/out/renamed", "--qlog-dir=/scratch/out/renamed",
                "--keylog-file=", "--qlog-dir", "/scratch/out/renamed", "--keylog-file=/scratch/out/renamed",
                "--cert", "/scratch/out/x",
            ])
    }
}
