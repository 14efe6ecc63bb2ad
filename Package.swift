// swift-tools-version:6.0
// PTTTransport: a push-to-talk transport over QUIC (ngtcp2 0.12.1 or 1.x + GnuTLS) with a QMux/TCP fallback.
// Zero Swift package dependencies: the toolchain and Debian's C libraries only.
import PackageDescription

let package = Package(
    name: "PTTTransport",
    products: [
        .library(name: "PTTTransport", targets: ["PTTTransport"]),
        .library(name: "PTTTalkGroups", targets: ["PTTTalkGroups"]),
        .executable(name: "ptt-transport", targets: ["ptt-transport"]),
        .executable(name: "ptt-lab", targets: ["ptt-lab"]),
    ],
    targets: [
        // C: the system libraries, and the few helpers Swift cannot import directly. pkg-config finds ngtcp2, so
        // PKG_CONFIG_PATH alone selects the generation a build links (0.12.1 or 1.x; see .ci/ngtcp2-backports).
        .systemLibrary(name: "CNgtcp2", path: "Sources/CNgtcp2", pkgConfig: "libngtcp2_crypto_gnutls"),
        .target(name: "CTransportShims", dependencies: ["CNgtcp2"], path: "Sources/CTransportShims"),
        // Sans-IO protocol logic: connections, codecs, no sockets, no clock.
        .target(
            name: "TransportCore", dependencies: ["CNgtcp2", "CTransportShims"], exclude: ["QMux/QMuxDraftDigest.md"]),
        // The event loop and the sockets.
        .target(name: "TransportIO", dependencies: ["CTransportShims", "TransportCore"]),
        // The public async API; imports no C module.
        .target(name: "PTTTransport", dependencies: ["TransportCore", "TransportIO"]),
        // Talk groups on top of the transport: channels with fan-out, floor control and liveness, and the reference
        // relays (echo, fan-out). A relay imports it beside PTTTransport; a phone needs only PTTTransport.
        .target(name: "PTTTalkGroups", dependencies: ["PTTTransport", "TransportCore", "TransportIO"]),
        // What both command lines share: argument parsing and JSON lines. No transport code.
        .target(name: "CommandLineSupport"),
        // The operator's binary: serve, connect, --version. Built from the library targets only (no lab code).
        .executableTarget(
            name: "ptt-transport",
            dependencies: ["PTTTransport", "PTTTalkGroups", "TransportCore", "TransportIO", "CommandLineSupport"]),
        // The library's targets above depend on nothing below: what follows is tooling (the lab), never shipped
        // in an app that embeds PTTTransport nor in the operator's ptt-transport.
        //
        // The lab's own C helpers (network namespaces, TUN devices, program spawning, the kernel's sendmmsg floor).
        // Tooling, outside the product: the rule "C interop only in CNgtcp2 and CTransportShims" is the library's.
        .target(name: "CNetworkEmulation", dependencies: ["CTransportShims"], path: "Sources/CNetworkEmulation"),
        // The emulated network (namespaces, TUN, delay line, NAT, capture), the kernel send floor and program
        // spawning. It installs TransportIO's socket-factory and loop-thread-start hooks.
        .target(name: "NetworkEmulation", dependencies: ["CNetworkEmulation", "TransportCore", "TransportIO"]),
        // In-memory QUIC floors (client connections and a server endpoint exchanging packets without sockets).
        .target(name: "BenchSupport", dependencies: ["TransportCore"]),
        // The push gateway emulator: a WakeSender delivering wake tickets after seeded log-normal delays.
        .target(name: "PushEmulation", dependencies: ["PTTTalkGroups", "PTTTransport", "TransportCore"]),
        // The lab's binary: bench, fuzz, matrix (and the bench's load generator). It runs ptt-transport, built beside
        // it, as its child relay.
        .executableTarget(
            name: "ptt-lab", dependencies: ["PTTBench", "PTTFuzz", "PTTMatrix", "CommandLineSupport"]),
        // The benchmark scenarios and statistics behind `ptt-transport bench` (its emulated paths: NetworkEmulation).
        .target(
            name: "PTTBench",
            dependencies: [
                "PTTTransport", "PTTTalkGroups", "TransportIO", "ChildProcesses", "NetworkEmulation", "BenchSupport",
                "PushEmulation", "TransportCore",
            ]),
        // Running other programs (peers, child relays, the CLI): shared by the benchmark and the tests.
        .target(name: "ChildProcesses", dependencies: ["TransportCore", "TransportIO", "NetworkEmulation"]),
        // The seeded fuzzer behind `ptt-transport fuzz`: the core's parsers (probes and seeds), the CLI, and a live
        // relay's sockets.
        .target(
            name: "PTTFuzz",
            dependencies: ["PTTTransport", "PTTTalkGroups", "TransportCore", "TransportIO", "ChildProcesses"]),
        // The interop runner's cases on the emulated path behind `ptt-transport matrix`.
        .target(
            name: "PTTMatrix",
            dependencies: [
                "PTTTransport", "PTTTalkGroups", "TransportCore", "TransportIO", "ChildProcesses", "NetworkEmulation",
            ]),
        // Two test speeds. The unit layer starts no process: sans-IO logic on a virtual clock, codecs, parsers,
        // in-memory exchanges (`swift test --skip PTTIntegrationTests`).
        .testTarget(name: "TransportCoreTests", dependencies: ["TransportCore", "BenchSupport", "TestSupport"]),
        .testTarget(name: "TransportIOTests", dependencies: ["TransportIO", "NetworkEmulation"]),
        .testTarget(name: "NetworkEmulationTests", dependencies: ["NetworkEmulation", "TransportCore", "TransportIO"]),
        .testTarget(
            name: "PTTTransportTests", dependencies: ["PTTTransport", "PTTTalkGroups", "TransportCore", "TransportIO"]),
        .testTarget(name: "PTTBenchTests", dependencies: ["PTTBench", "PTTTransport", "ChildProcesses"]),
        .testTarget(name: "PTTFuzzTests", dependencies: ["PTTFuzz", "TransportCore"]),
        // The integration speed: everything that starts a process (the CLI, child relays, aioquic and moq-dev peers,
        // Redis) or runs over real sockets and real time. Its suites carry `.integration`, which runs at most a few
        // of their tests at once (TestSupport's `IntegrationGate`).
        .testTarget(
            name: "PTTIntegrationTests",
            dependencies: [
                "PTTTransport", "PTTTalkGroups", "TransportCore", "TransportIO", "ChildProcesses", "NetworkEmulation",
                "BenchSupport", "PushEmulation", "PTTBench", "PTTFuzz", "PTTMatrix", "TestSupport",
            ]),
        // The `.integration` trait and its gate (imports Testing; never part of a product).
        .target(name: "TestSupport", dependencies: ["TransportCore"], path: "Tests/TestSupport"),
    ]
)
