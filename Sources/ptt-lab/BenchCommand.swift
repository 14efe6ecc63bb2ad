import CommandLineSupport
import Foundation
import PTTBench

/// `ptt-lab bench`: connection-setup latency and relay capacity (see PTTBench).
enum BenchCommand {
    static let usage = """
        usage: ptt-lab bench [--iterations N] [--rtt MS] [--loss P] [--scenario NAME]... [--scenarios A,B]
                             [--json] [--udp-batch N] [--relay-loops N] [--no-tcp-fast-open]
                             [--cert PEM --key PEM --ca PEM] [--package-root DIR]
                             [--anti-replay redis://HOST:PORT[/DB]] [--listeners N[,N...]] [--transports quic,tcp]
                             [--wake-relay child|in-process] [--wake-first-flight loop,task]
                             [--fanout-listeners N[,N...]] [--drains N]
          --scenario: default all but crash-recovery, wake-to-voice, rolling-restart, in-place-upgrade,
            floor-access, group-across-relays and balancer-drain, which run only when named (floor-access: MCPTT KPI 1 and emergency pre-emption;
            --iterations rounds, at most 50; rolling-restart: a drain under a call, needs --rtt; in-place-upgrade:
            serve --workers 2 upgraded with SIGUSR2 under 100 calls;
            group-across-relays: three child relays and a Redis on loopback, one group across them;
            balancer-drain: three child relays behind a balancer polling /readyz every 100 ms, the call's relay
            drained --drains times (default 10), with --drain-notice 0.3 and without).
          --listeners, --transports: wake-to-voice's suspended listener counts (default 1,100,1000) and transports
          (default quic,tcp); --wake-relay in-process runs its relay in this process (the wake hook's hand-off is
          then measured inside the relay) instead of as a child serve --talk-groups --wake-exec.
          --fanout-listeners: capacity-fanout's listener counts in place of its ladder (e.g. 1000: one step, to
          profile the relay at that load).
          --wake-first-flight loop,task: wake-to-voice's in-process relay answers the first flight on the loop
          (default) and/or through the connection's task (an authenticator that may wait), one round each.
          --anti-replay: handshake-cost's relay keeps its 0-RTT anti-replay store in that Redis (a running one).
        """

    static func run(_ raw: [String]) async throws {
        let args = try Arguments(
            raw,
            options: [
                "iterations", "rtt", "loss", "scenario", "cert", "key", "ca",
                "package-root", "scenarios", "udp-batch", "relay-loops",
                "anti-replay", "listeners", "transports", "wake-relay", "fanout-listeners", "wake-first-flight",
                "drains",
            ],
            flags: ["json", "no-tcp-fast-open"])
        guard args.positionals.isEmpty else {
            throw Arguments.Failure(description: "unexpected \(args.positionals[0])")
        }
        var options = BenchOptions()
        options.iterations = try args.integer("iterations", default: 50)
        guard options.iterations > 0 else { throw Arguments.Failure(description: "--iterations must be at least 1") }
        options.rttMilliseconds = try args.number("rtt")
        options.loss = try args.number("loss") ?? 0
        guard options.loss < 1 else { throw Arguments.Failure(description: "--loss is a fraction below 1, e.g. 0.01") }
        options.scenarios =
            args.values("scenario") + (args.value("scenarios")?.split(separator: ",").map(String.init) ?? [])
        options.udpSendBatch = try args.integer("udp-batch", default: 64)
        guard (1...1_024).contains(options.udpSendBatch) else {
            throw Arguments.Failure(description: "--udp-batch is 1 to 1024 packets per sendmmsg")
        }
        options.json = args.flag("json")
        options.tcpFastOpen = !args.flag("no-tcp-fast-open")
        options.certificate = args.value("cert") ?? "certs/server.pem"
        options.privateKey = args.value("key") ?? "certs/server.key"
        options.certificateAuthority = args.value("ca") ?? "certs/ca.pem"
        if let root = args.value("package-root") { options.packageRoot = root }
        if args.value("relay-loops") != nil {
            options.relayLoops = try args.integer("relay-loops", default: 0)
            guard options.relayLoops! >= 1 else {
                throw Arguments.Failure(description: "--relay-loops must be at least 1")
            }
        }
        options.relayAntiReplay = args.value("anti-replay")
        if let list = args.value("listeners") {
            let counts = list.split(separator: ",").map { Int($0) }
            guard !counts.isEmpty, counts.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 5_000 }) else {
                throw Arguments.Failure(description: "--listeners takes counts of 1 to 5000, e.g. 1,100,1000")
            }
            options.wakeListeners = counts.compactMap { $0 }
        }
        if let list = args.value("fanout-listeners") {
            let counts = list.split(separator: ",").map { Int($0) }
            guard !counts.isEmpty, counts.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 16_000 }) else {
                throw Arguments.Failure(description: "--fanout-listeners takes counts of 1 to 16000, e.g. 500,1000")
            }
            options.fanoutListeners = counts.compactMap { $0 }
        }
        switch args.value("wake-relay") ?? "child" {
        case "child": options.wakeRelayInProcess = false
        case "in-process": options.wakeRelayInProcess = true
        case let other: throw Arguments.Failure(description: "--wake-relay \(other): use child or in-process")
        }
        options.balancerDrains = try args.integer("drains", default: 10)
        guard (1...100).contains(options.balancerDrains) else {
            throw Arguments.Failure(description: "--drains is 1 to 100 drains")
        }
        if let list = args.value("transports") {
            let names = list.split(separator: ",").map(String.init)
            guard !names.isEmpty, names.allSatisfy({ ["quic", "tcp"].contains($0) }) else {
                throw Arguments.Failure(description: "--transports takes quic, tcp or quic,tcp")
            }
            options.wakeTransports = names
        }
        if let list = args.value("wake-first-flight") {
            let names = list.split(separator: ",").map(String.init)
            guard !names.isEmpty, names.allSatisfy({ ["loop", "task"].contains($0) }) else {
                throw Arguments.Failure(description: "--wake-first-flight takes loop, task or loop,task")
            }
            options.wakeFirstFlight = names
        }
        // The relay of capacity-memory runs as a child `serve` of this very binary (resolved now: a child started
        // through `ip netns exec` would see another /proc/self/exe).
        options.relayExecutable = try LabExecutables.relay()
        options.labExecutable = LabExecutables.lab()
        for path in [options.certificate, options.privateKey, options.certificateAuthority]
        where !FileManager.default.isReadableFile(atPath: path) {
            throw Arguments.Failure(
                description: "cannot read \(path); run from the repository root or pass --cert/--key/--ca")
        }
        let interactive = isatty(2) != 0
        options.progress = { line in
            let text = interactive ? "\r\u{1b}[K\(line)" : "\(line)\n"
            FileHandle.standardError.write(Data(text.utf8))
        }
        let report = try await Bench.run(options)
        if interactive { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
        print(options.json ? report.json() : report.table())
    }
}
