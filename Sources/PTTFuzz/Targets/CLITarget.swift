import ChildProcesses
import Foundation
import PTTTransport
import TransportCore

/// The `ptt-transport` command line, fuzzed by running the built executable with generated and mutated argument
/// lists, each for at most 1 s (then SIGTERM, then SIGKILL). A death by any signal the fuzzer did not send is a
/// crash. Never runs `bench` or `fuzz`; every path is inside a scratch directory (`serve --ticket-key` creates
/// files; `certificates` must be copies there), key logs and qlogs only inside its `out` directory, and children
/// run without `SSLKEYLOGFILE`; addresses stay on loopback. "Accepted": exit 0 or still running at
/// the deadline; "rejected": a non-zero exit (a usage error).
struct CLITarget: Sendable {
    static let name = "cli"
    let executable: String
    let certificates: Certificates
    let scratch: String
    /// The relay's port, so some `connect` runs reach a real server.
    let relayPort: UInt16

    func run(count: Int, random: inout FuzzRandom) async -> TargetResult {
        var result = TargetResult(name: Self.name)
        let (wallStart, cpuStart) = (CPUTime.wall(), CPUTime.process())
        var childCPU = 0.0
        for _ in 0..<count {
            let arguments = nextArguments(&random)
            let (status, signal, cpu) = await execute(arguments)
            childCPU += cpu
            if let signal {
                result.inputs += 1
                result.crashes += 1
                result.findings.append("died by signal \(signal): ptt-transport \(quoted(arguments))")
            } else {
                result.count(accepted: status == 0 || status == nil)
            }
        }
        result.wallSeconds = CPUTime.wall() - wallStart
        result.cpuSeconds = CPUTime.process() - cpuStart + childCPU
        return result
    }

    /// Runs the executable: (exit status, or nil when the fuzzer stopped it; an unexpected signal; child CPU s).
    private func execute(_ arguments: [String]) async -> (Int32?, Int32?, Double) {
        // GnuTLS appends key logs to SSLKEYLOGFILE by itself: a fuzzed child must not write to the caller's file.
        guard
            let process = try? SpawnedProgram(
                executable, arguments, removing: ["SSLKEYLOGFILE"], directory: scratch, output: .discard,
                errors: .discard)
        else { return (127, nil, 0) }
        return await Blocking.run {
            var stopped = false
            let deadline = Date().addingTimeInterval(1)
            var cpu = 0.0
            while process.isRunning && Date() < deadline {
                cpu = max(cpu, CPUTime.process(process.processIdentifier))
                usleep(2_000)
            }
            if process.isRunning {
                stopped = true
                process.terminate(within: 2)
            }
            guard process.terminationStatus >= 0 else { return (nil, nil, cpu) }  // status unknown
            if process.signaled {
                let signal = process.terminationStatus
                return stopped && (signal == SIGTERM || signal == SIGKILL) ? (nil, nil, cpu) : (nil, signal, cpu)
            }
            return (stopped ? nil : process.terminationStatus, nil, cpu)
        }
    }

    /// A command with options drawn from its real option set and hostile values, then list-level mutations.
    func nextArguments(_ random: inout FuzzRandom) -> [String] {
        let commands = ["serve", "connect", "help", "--help", "-h", "", "serv", "connect\u{0}x", "SERVE"]
        let command = commands[random.below(commands.count)]
        let options = command == "serve" ? Self.serveOptions : Self.connectOptions
        var arguments = [command]
        if command == "connect" || random.oneIn(6) { arguments.append(pick(addresses, &random)) }
        for _ in 0..<random.below(7) {
            let (name, kind) = options[random.below(options.count)]
            let value = self.value(kind, &random)
            switch random.below(6) {
            case 0: arguments.append("--\(name)=\(value)")
            case 1: arguments.append("--\(name)")
            default: arguments += ["--\(name)", value]
            }
        }
        for _ in 0..<random.below(3) { mutateList(&arguments, &random) }
        if arguments.first.map({ ["bench", "fuzz", "matrix"].contains($0) }) ?? false { arguments[0] = "help" }
        // Mutations must not lead a path out of the scratch directory (a missing --ticket-key file is created).
        let confined = arguments.map { argument in
            let clean = argument.replacingOccurrences(of: "\u{0}", with: "")
            let escapes = clean.contains("..") || (clean.contains("/") && !clean.hasPrefix(scratch + "/"))
            if escapes { return "\(scratch)/renamed" }
            // Nor an address off this host (a bit flip turns 127.0.0.1 into 107.0.0.1), nor a host name (a
            // mutated name would be looked up in DNS: traffic off this machine).
            if let address = SocketAddress(parsing: clean),
                !(address.host.hasPrefix("127.") || address.host == "::1" || address.host == "0.0.0.0"
                    || address.host == "::")
            {
                return "127.0.0.1:1"
            }
            if SocketAddress(parsing: clean) == nil, let named = ServerAddress(clean), named.host != "localhost" {
                return "127.0.0.1:1"
            }
            return clean
        }
        return confineOutputs(confined)
    }

    /// Options that create or append to files: their values stay inside `scratch/out`, whatever the mutations
    /// did (a swap can hand `--keylog-file` the certificate's path), so no run can grow or truncate anything else.
    static let outputOptions: Set<String> = ["keylog-file", "qlog-dir"]

    /// The directory output options write into (created with the scratch directory).
    var outputDirectory: String { "\(scratch)/out" }

    /// `arguments` with every value the CLI's parser would take for an output option (`--name VALUE` or
    /// `--name=VALUE`) moved into `outputDirectory` unless it already is there; an empty value stays (it names
    /// no file).
    func confineOutputs(_ arguments: [String]) -> [String] {
        var result = arguments
        for index in result.indices where result[index].hasPrefix("--") {
            let option = result[index].dropFirst(2)
            if let equals = option.firstIndex(of: "=") {
                guard Self.outputOptions.contains(String(option[..<equals])) else { continue }
                let value = String(option[option.index(after: equals)...])
                result[index] = "--\(option[..<equals])=\(confinedOutput(value))"
            } else if Self.outputOptions.contains(String(option)), index + 1 < result.count {
                result[index + 1] = confinedOutput(result[index + 1])
            }
        }
        return result
    }

    private func confinedOutput(_ path: String) -> String {
        let inside = path == outputDirectory || path.hasPrefix(outputDirectory + "/")
        return path.isEmpty || (inside && !path.contains("..")) ? path : "\(outputDirectory)/renamed"
    }

    private enum Kind { case address, number, file, text, transport, flag, outputFile, outputDirectory }

    private static let serveOptions: [(String, Kind)] = [
        ("listen", .address), ("cert", .file), ("key", .file), ("tcp-listen", .address), ("alpn", .text),
        ("ticket-key", .file), ("previous-ticket-key", .file), ("idle-timeout", .number), ("no-udp", .flag),
        ("retry", .flag), ("events", .flag), ("hold-early", .flag), ("early-datagrams", .flag), ("bogus", .text),
        ("max-connections", .number), ("retry-above", .number), ("no-source-limits", .flag),
        ("reset-secret", .file),
        ("event-loops", .number),
        ("keylog-file", .outputFile), ("qlog-dir", .outputDirectory),
    ]
    private static let connectOptions: [(String, Kind)] = [
        ("ca", .file), ("server-name", .text), ("alpn", .text), ("message", .text), ("datagrams", .number),
        ("session-file", .file), ("transport", .transport), ("timeout", .number), ("json", .flag), ("x", .flag),
        ("keep", .number), ("interval", .number),
        ("migrate-after", .number), ("migrate-to", .address),
        ("keylog-file", .outputFile), ("qlog-dir", .outputDirectory),
    ]

    private var addresses: [String] {
        [
            "127.0.0.1:\(relayPort)", "[::1]:\(relayPort)", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1",
            "127.0.0.1:", ":443", "[::1", "::1:1", "127.0.0.1:99999999999999999999", "", "127.0.0.1:\(relayPort):1",
            "[]:1", "0.0.0.0:0", "127.0.0.1:1",
        ]
    }

    private func value(_ kind: Kind, _ random: inout FuzzRandom) -> String {
        switch kind {
        case .address: return pick(addresses, &random)
        case .number:
            return pick(
                [
                    "0", "1", "-1", "0.5", "1e308", "-0", "nan", "inf", "-inf", "9223372036854775808",
                    "99999999999999999999", "0x10", "", " 1", "1e-320", "3",
                ], &random)
        case .file:
            return pick(
                [
                    certificates.chain, certificates.key, certificates.authority, "\(scratch)/missing",
                    "\(scratch)/empty", "\(scratch)/garbage", "\(scratch)/session", "\(scratch)/ticket-key",
                    "\(scratch)", "", "\(scratch)/new-\(random.below(1000))",
                ], &random)
        case .text:
            let bytes = Mutator.mutate(
                Array(pick(["ptt/1", "localhost", "hello", "h3"], &random).utf8),
                corpus: [], using: &random)
            return String(decoding: bytes, as: UTF8.self)
        case .outputFile:
            return pick(
                [
                    "\(outputDirectory)/keylog", "\(outputDirectory)/keylog-\(random.below(1000))", outputDirectory,
                    "\(outputDirectory)/missing/keylog", "", "\(outputDirectory)/\u{7f}\u{1}",
                ], &random)
        case .outputDirectory:
            return pick(
                [
                    outputDirectory, "\(outputDirectory)/missing", "\(outputDirectory)/keylog", "",
                    "\(outputDirectory)/",
                ],
                &random)
        case .transport: return pick(["quic", "tcp", "auto", "QUIC", "", "udp"], &random)
        case .flag: return pick(["1", "true", ""], &random)
        }
    }

    private func mutateList(_ arguments: inout [String], _ random: inout FuzzRandom) {
        guard arguments.count > 1 else { return }
        let index = 1 + random.below(arguments.count - 1)
        switch random.below(4) {
        case 0: arguments.remove(at: index)
        case 1: arguments.insert(arguments[index], at: index)
        case 2: arguments.swapAt(index, 1 + random.below(arguments.count - 1))
        default:
            let bytes = Mutator.mutate(Array(arguments[index].utf8), corpus: [], using: &random)
            arguments[index] = String(decoding: bytes, as: UTF8.self)
        }
    }

    private func pick(_ choices: [String], _ random: inout FuzzRandom) -> String {
        choices[random.below(choices.count)]
    }

    private func quoted(_ arguments: [String]) -> String {
        arguments.map { "'\($0.replacingOccurrences(of: "'", with: "'\\''"))'" }.joined(separator: " ")
    }
}
