import Testing

/// `serve`'s admission flags take a whole number (or `off` for `--retry-above`): anything else is one clear line
/// on stderr and exit 1, before the relay binds anything.
@Suite("serve's admission flags: bad values are a clear error")
struct ServeArgumentTests {
    @Test(arguments: [
        (["--retry-above", "x"], "--retry-above takes a non-negative whole number, not x"),
        (["--retry-above", "-3"], "--retry-above takes a non-negative whole number, not -3"),
        (["--max-connections", "1e9"], "--max-connections takes a non-negative whole number, not 1e9"),
        (["--max-connections"], "--max-connections"),
        (["--early-datagrams", "--hold-early"], "--early-datagrams delivers early data at once; drop --hold-early"),
        (["--event-loops", "0"], "--event-loops must be at least 1"),
        (["--event-loops", "two"], "--event-loops takes a non-negative whole number, not two"),
        (["--zero-rtt-tickets", "0"], "--zero-rtt-tickets must be at least 1"),
        (["--zero-rtt-tickets", "many"], "--zero-rtt-tickets takes a non-negative whole number, not many"),
        (["--anti-replay", "http://127.0.0.1:6379"], "an anti-replay store is redis://HOST:PORT[/DB]"),
        (["--anti-replay", "redis://127.0.0.1:99999"], "bad Redis port"),
        (["--anti-replay", "redis://127.0.0.1:6379/x"], "bad Redis database number"),
        (["--anti-replay", "redis://user:pw@127.0.0.1:6379"], "Redis authentication is not supported"),
        (["--anti-replay", "redis://127.0.0.1?deadline-ms=soon"], "bad Redis option deadline-ms=soon"),
        (["--anti-replay", "redis://no-such-host.invalid:6379"], "cannot resolve no-such-host.invalid"),
    ])
    func aBadValueIsOneLineAndExit1(flags: [String], says: String) async throws {
        try await expectCLIRefuses(
            ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey] + flags,
            says: says)
    }
}
