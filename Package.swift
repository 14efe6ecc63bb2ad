// swift-tools-version:6.0
// PTTTransport: a push-to-talk transport over QUIC (ngtcp2 0.12.1 or 1.x + GnuTLS) with a QMux/TCP fallback.
// Zero Swift package dependencies: the toolchain and Debian's C libraries only.
import PackageDescription

let package = Package(
    name: "PTTTransport",
    products: [
        .library(name: "PTTTransport", targets: ["PTTTransport"]),
        .executable(name: "ptt-transport", targets: ["ptt-transport"]),
    ],
    targets: [
        // C: the system libraries, and the few helpers Swift cannot import directly. pkg-config finds ngtcp2, so
        // PKG_CONFIG_PATH alone selects the generation a build links (0.12.1 or 1.x; see .ci/ngtcp2-backports).
        .systemLibrary(name: "CNgtcp2", path: "Sources/CNgtcp2", pkgConfig: "libngtcp2_crypto_gnutls"),
        .target(name: "CTransportShims", dependencies: ["CNgtcp2"], path: "Sources/CTransportShims"),
        // Sans-IO protocol logic: connections, codecs, no sockets, no clock.
        .target(name: "TransportCore", dependencies: ["CNgtcp2", "CTransportShims"]),
        // The event loop and the sockets.
        .target(name: "TransportIO", dependencies: ["CTransportShims", "TransportCore"]),
        // The public async API; imports no C module.
        .target(name: "PTTTransport", dependencies: ["TransportCore", "TransportIO"]),
        .executableTarget(
            name: "ptt-transport",
            dependencies: ["PTTTransport", "TransportCore", "TransportIO", "PTTBench", "PTTFuzz", "PTTMatrix"]),
        // The benchmark scenarios, statistics and path emulation behind `ptt-transport bench`.
        .target(name: "PTTBench", dependencies: ["PTTTransport", "TransportIO", "ChildProcesses"]),
        // Running other programs (peers, child relays, the CLI): shared by the benchmark and the tests.
        .target(name: "ChildProcesses", dependencies: ["TransportCore", "TransportIO"]),
        // The seeded fuzzer behind `ptt-transport fuzz`: the core's parsers, the CLI, and a live relay's sockets.
        .target(name: "PTTFuzz", dependencies: ["PTTTransport", "TransportCore", "TransportIO", "ChildProcesses"]),
        // The interop runner's cases on the emulated path behind `ptt-transport matrix`.
        .target(name: "PTTMatrix", dependencies: ["PTTTransport", "TransportCore", "TransportIO", "ChildProcesses"]),
        .testTarget(name: "TransportCoreTests", dependencies: ["TransportCore", "ChildProcesses"]),
        .testTarget(name: "TransportIOTests", dependencies: ["TransportIO"]),
        .testTarget(
            name: "PTTTransportTests", dependencies: ["PTTTransport", "TransportCore", "TransportIO", "ChildProcesses"]),
        .testTarget(name: "PTTBenchTests", dependencies: ["PTTBench", "PTTTransport", "ChildProcesses"]),
        .testTarget(name: "PTTFuzzTests", dependencies: ["PTTFuzz", "TransportCore"]),
        .testTarget(name: "PTTMatrixTests", dependencies: ["PTTMatrix", "PTTTransport"]),
    ]
)
