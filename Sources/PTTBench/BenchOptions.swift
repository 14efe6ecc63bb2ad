import Foundation

/// What `ptt-lab bench` should run.
public struct BenchOptions: Sendable {
    /// Connections per setup scenario.
    public var iterations = 50
    /// Emulated round-trip time in milliseconds (nil: loopback).
    public var rttMilliseconds: Double?
    /// Emulated packet loss (0–1).
    public var loss: Double = 0
    /// Scenario names to run (empty: all).
    public var scenarios: [String] = []
    /// Print JSON instead of a table.
    public var json = false
    /// On emulated paths, configure the relay's namespace for TCP Fast Open (`net.ipv4.tcp_fastopen=3`), as the
    /// README recommends for relay hosts; clients always use it when the kernel allows.
    public var tcpFastOpen = true
    /// Certificate, key and CA used by the in-process relay and clients.
    public var certificate = "certs/server.pem"
    public var privateKey = "certs/server.key"
    public var certificateAuthority = "certs/ca.pem"
    /// The package root, where `Tests/Peers/aioquic_echo_server.py` and `.venv-peers` are looked up (the aioquic
    /// side-by-side runs). Default: `PTT_PACKAGE_ROOT`, else the current directory (`swift run` runs there).
    public var packageRoot =
        ProcessInfo.processInfo.environment["PTT_PACKAGE_ROOT"]
        ?? FileManager.default.currentDirectoryPath
    /// The operator's `ptt-transport`, to run relays as children (`serve`: `capacity-memory` measures each side on
    /// its own, `handshake-cost`, `wake-storm` and `crash-recovery` need a relay process). nil (e.g. inside a test
    /// process that has no path to it): relay and client share the process, or the scenario says it was skipped.
    public var relayExecutable: String?
    /// The lab's own `ptt-lab`, to run `wake-storm`'s load generator as a child (`wake-storm-load`).
    public var labExecutable: String?
    /// Packets per UDP send batch (`sendmmsg` + GSO) in this process; 1 sends each packet with its own syscall,
    /// the behaviour before batching, to measure what batching saves in the same build.
    public var udpSendBatch = 64
    /// The relay's event loops in the capacity scenarios and each relay's in `group-across-relays` (nil: the
    /// server's default, one per CPU).
    public var relayLoops: Int?
    /// `handshake-cost`'s relay keeps its 0-RTT anti-replay store in this Redis (`serve --anti-replay URL`; nil: in
    /// process), to measure what the shared store costs a resumed handshake.
    public var relayAntiReplay: String?
    /// `capacity-fanout`'s listener counts, one step each, in place of its ladder (nil: the full ladder, or the quick
    /// one with `iterations` below 10). The climb still stops as the ladder does (loss, two failing steps in a row):
    /// `[1000]` runs one step of 1,000 listeners, e.g. to profile the relay at that load.
    public var fanoutListeners: [Int]?
    /// `wake-to-voice`'s suspended listener counts, one round each.
    public var wakeListeners = [1, 100, 1_000]
    /// `wake-to-voice` runs its relay in this process instead of as a child `serve --talk-groups`.
    public var wakeRelayInProcess = false
    /// `wake-to-voice`'s transports (`quic`, `tcp`).
    public var wakeTransports = ["quic", "tcp"]
    /// How `wake-to-voice`'s in-process relay answers a woken phone's first flight, one round each: `loop` (an
    /// immediate authenticator: join and catch-up acted on in the loop turn that read them) and `task` (an
    /// authenticator that may wait: through the connection's task, as before).
    public var wakeFirstFlight = ["loop"]
    /// `balancer-drain`'s drains per row (issue 36's target counts 10).
    public var balancerDrains = 10
    /// `balancer-drain`'s `--drain-notice` (seconds) in its first row.
    public var balancerDrainNotice = 0.3
    /// `balancer-drain` also runs its control row (`--drain-notice 0`).
    public var balancerControl = true
    /// Where progress lines go (stderr in the CLI).
    public var progress: @Sendable (String) -> Void = { _ in }

    public init() {}

    /// Whether `name` was selected: by name, or by an empty selection when it is not `BenchScenario.optIn`.
    func wants(_ name: String) -> Bool {
        scenarios.isEmpty ? !BenchScenario.optIn.contains(name) : scenarios.contains(name)
    }
}

/// Every scenario the benchmark knows, in run order.
public enum BenchScenario {
    public static let setup = [
        "quic-full", "quic-resumed", "quic-0rtt", "quic-0rtt-talker", "quic-0rtt-rejected",
        "tcp-full", "tcp-resumed", "race-udp-blocked", "race-udp-known-blocked",
    ]
    public static let capacity = [
        "capacity-datagrams", "capacity-fanout", "capacity-handshakes",
        "capacity-memory", "handshake-cost", "wake-storm", "quic-lb-cost", "admin-cost",
    ]
    /// Cold connects on a lossy path (run with `--loss`), with ngtcp2's initial RTT and with the library's.
    public static let loss = ["cold-connect-loss"]
    /// The self-reconnecting link (`TransportLink`): each name yields several rows.
    public static let link = ["reconnect"]
    /// A phone changing networks mid-call: a NAT rebinding (emulated path only, run with `--rtt`) and the
    /// client's own migration to another local address.
    public static let handover = ["handover-rebind", "handover-migrate"]
    /// A relay killed with SIGKILL and restarted, with and without its peer snapshot: listening links' recovery.
    public static let crash = ["crash-recovery"]
    /// Suspended talk-group listeners woken by emulated pushes, catching up on the burst (run with `--rtt`).
    public static let wake = ["wake-to-voice"]
    /// A relay drained under a call at the path's RTT: what the phone lost while its link moved (run with `--rtt`).
    public static let drain = ["rolling-restart"]
    /// `serve --workers 2` upgraded in place (SIGUSR2) under 100 calls: calls dropped, frames lost, longest gap.
    public static let upgrade = ["in-place-upgrade"]
    /// MCPTT KPI 1 (floor request → grant, a suspended talker's wake included) and emergency pre-emption, over QUIC
    /// and TCP (run with `--rtt 100 --loss 0.02`).
    public static let floor = ["floor-access"]
    /// One talk group over three child relays and a Redis (issue 35): hop latency, grants, CPU per trunk copy,
    /// double grants over 10,000 contested requests, re-home after SIGKILL (loopback).
    public static let fleet = ["group-across-relays"]
    /// Three child relays behind a balancer polling `/readyz` every 100 ms, the call's relay drained and restarted
    /// `balancerDrains` times, with `--drain-notice` and without (issue 36's balancer target).
    public static let balancer = ["balancer-drain"]
    /// Run only when named (`--scenario`), never by `bench` alone: each of their rounds waits seconds.
    public static let optIn = crash + wake + drain + upgrade + floor + fleet + balancer
    public static let all =
        setup + capacity + loss + link + handover + crash + wake + drain + upgrade + floor + fleet + balancer
}
