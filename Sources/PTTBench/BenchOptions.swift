/// What `ptt-transport bench` should run.
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
    /// Where progress lines go (stderr in the CLI).
    public var progress: @Sendable (String) -> Void = { _ in }

    public init() {}

    /// Whether `name` was selected.
    func wants(_ name: String) -> Bool { scenarios.isEmpty || scenarios.contains(name) }
}

/// Every scenario the benchmark knows, in run order.
public enum BenchScenario {
    public static let setup = ["quic-full", "quic-resumed", "quic-0rtt", "quic-0rtt-rejected",
                               "tcp-full", "tcp-resumed", "race-udp-blocked", "race-udp-known-blocked"]
    public static let capacity = ["capacity-datagrams", "capacity-fanout", "capacity-handshakes",
                                  "capacity-memory"]
    public static let all = setup + capacity
}
