import ChildProcesses
import Foundation

/// Runs a whole fuzzing session: starts the relay, captures real flights, fuzzes every parser, the CLI, the
/// relay's UDP and TCP sockets, and the relay's Redis client against a hostile Redis, and reports.
public enum Fuzz {
    /// The in-process targets, seeded with `flights` where they come from captured traffic.
    static func parserTargets(_ flights: CapturedFlights, certificates: Certificates) -> [ParserTarget] {
        QMuxTargets.all() + WireTargets.all() + TalkGroupTargets.all() + RelayControlTargets.all()
            + ResumptionTargets.all(captured: flights.resumptionStates)
            + [ClientHelloTarget.make(flights: flights.tcp), RESPTarget.make()]
            + [QUICEndpointTarget.make(seeds: flights.quicAll, certificates: certificates)].compactMap { $0 }
    }

    /// Runs everything `options` asks for. Throws only when the fuzzer itself cannot run (a relay that does not
    /// start, certificates missing); findings are in the report.
    public static func run(_ options: FuzzOptions) async throws -> FuzzReport {
        CrashWitness.install()
        return try await CrashWitness.withOwnership { try await runTargets(options) }
    }

    private static func runTargets(_ options: FuzzOptions) async throws -> FuzzReport {
        let wallStart = CPUTime.wall()
        var report = FuzzReport(seed: options.seed, iterations: options.iterations)
        var random = FuzzRandom(seed: options.seed)
        let scratch = try Scratch.make(certificates: options.certificates)
        defer { try? FileManager.default.removeItem(atPath: scratch.directory) }

        let relay = try await RelayUnderTest.start(
            executable: options.executable,
            certificates: options.certificates, scratch: scratch.directory)
        report.notes.append(
            options.executable == nil
                ? "relay in this process"
                : "relay as a child `ptt-transport serve` on \(relay.address)")
        let flights = try await CapturedFlights.capture(relay, certificates: options.certificates)
        report.notes.append(flights.summary)

        let targets = parserTargets(flights, certificates: options.certificates)
        let budget = FuzzBudget(
            iterations: options.iterations, weights: targets.map(\.weight),
            withCLI: options.executable != nil)
        for (target, count) in zip(targets, budget.parsers) {
            var targetRandom = random.fork()
            options.progress("fuzzing \(target.name): \(count) inputs")
            report.targets.append(target.run(count: count, random: &targetRandom))
        }
        if let executable = options.executable {
            var cliRandom = random.fork()
            options.progress("fuzzing the CLI: \(budget.cli) runs")
            let cli = CLITarget(
                executable: executable, certificates: scratch.certificates,
                scratch: scratch.directory, relayPort: relay.address.port)
            report.targets.append(await cli.run(count: budget.cli, random: &cliRandom))
        } else {
            report.notes.append("cli skipped: no ptt-transport executable")
        }
        var udpRandom = random.fork()
        var tcpRandom = random.fork()
        options.progress("fuzzing the relay's UDP socket: \(budget.relayUDP) datagrams")
        report.targets.append(
            await RelayUDPTarget.run(
                count: budget.relayUDP, seeds: flights.quicAll,
                context: LiveContext(
                    relay: relay, certificates: options.certificates,
                    healthEvery: budget.healthEvery(budget.relayUDP)), random: &udpRandom))
        options.progress("fuzzing the relay's TCP port: \(budget.relayTCP) connections")
        report.targets.append(
            await RelayTCPTarget.run(
                count: budget.relayTCP, seeds: flights.tcp,
                context: LiveContext(
                    relay: relay, certificates: options.certificates,
                    healthEvery: budget.healthEvery(budget.relayTCP)), random: &tcpRandom))
        var qmuxRandom = random.fork()
        options.progress("fuzzing QMux inside TLS on the relay: \(budget.relayQMux) connections")
        report.targets.append(
            await RelayQMuxTarget.run(
                count: budget.relayQMux,
                context: LiveContext(
                    relay: relay, certificates: options.certificates,
                    healthEvery: budget.healthEvery(budget.relayQMux)), random: &qmuxRandom))
        var redisRandom = random.fork()
        options.progress("fuzzing the Redis client against a hostile Redis: \(budget.redisClient) plans")
        report.targets.append(await RedisClientTarget.run(count: budget.redisClient, random: &redisRandom))
        await relay.stop()
        report.wallSeconds = CPUTime.wall() - wallStart
        return report
    }
}

/// The scratch directory the CLI target's paths stay in, with copies of the certificates and a few files.
struct Scratch {
    let directory: String
    let certificates: Certificates

    static func make(certificates: Certificates) throws -> Scratch {
        let directory = NSTemporaryDirectory() + "ptt-fuzz-\(getpid())-\(UUID().uuidString.prefix(8))"
        let files = FileManager.default
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var copies = certificates
        for (source, name) in [
            (certificates.chain, "server.pem"), (certificates.key, "server.key"),
            (certificates.authority, "ca.pem"),
        ] {
            guard files.isReadableFile(atPath: source) else {
                try? files.removeItem(atPath: directory)
                throw FuzzError("cannot read \(source); run from the repository root or pass --certs DIR")
            }
            try files.copyItem(atPath: source, toPath: "\(directory)/\(name)")
        }
        copies.chain = "\(directory)/server.pem"
        copies.key = "\(directory)/server.key"
        copies.authority = "\(directory)/ca.pem"
        try files.createDirectory(atPath: "\(directory)/out", withIntermediateDirectories: false)  // CLI outputs
        _ = files.createFile(atPath: "\(directory)/empty", contents: Data())
        _ = files.createFile(atPath: "\(directory)/garbage", contents: Data((0..<300).map { UInt8($0 % 251) }))
        var corrupt = ResumptionTargets.blobSeeds[0]
        corrupt[corrupt.count / 2] ^= 0x20
        _ = files.createFile(atPath: "\(directory)/session", contents: Data(corrupt))
        return Scratch(directory: directory, certificates: copies)
    }
}
