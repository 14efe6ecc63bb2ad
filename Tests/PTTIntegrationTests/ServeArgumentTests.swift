import TestSupport
import Testing

/// `serve`'s admission flags take a whole number (or `off` for `--retry-above`), `--quic-lb` a valid QUIC-LB
/// configuration: anything else is one clear line on stderr and exit 1, before the relay binds anything.
@Suite("serve's admission flags: bad values are a clear error", .integration)
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
        (["--anti-replay", "redis://user:pw@127.0.0.1:6379"], "a Redis password does not belong in the URL"),
        (["--anti-replay", "redis://127.0.0.1?deadline-ms=soon"], "bad Redis option deadline-ms=soon"),
        (
            ["--quic-lb", "cr=7,server-id=01,nonce-len=4"],
            "--quic-lb cr=7,server-id=01,nonce-len=4: QUIC-LB config rotation 7"
        ),
        (["--quic-lb", "cr=1,server-id=0g,nonce-len=4"], "server-id=0g is not hexadecimal"),
        (["--quic-lb", "cr=1,server-id=01"], "cr, server-id and nonce-len are required"),
        (["--quic-lb", "cr=1,server-id=01,nonce-len=3"], "a QUIC-LB nonce has 4...18 bytes, not 3"),
        (["--quic-lb", "cr=1,server-id=0102030405060708090a,nonce-len=10"], "exceed 19 bytes together"),
        (["--quic-lb", "cr=1,server-id=01,nonce-len=4,key=00ff"], "a QUIC-LB key has 16 bytes, not 2"),
        (["--quic-lb", "cr=1,server-id=01,nonce-len=4,port=3"], "unknown, repeated or malformed field \"port=3\""),
        (["--relay-id", ""], "--relay-id needs a name"),
        (["--relay-id"], "--relay-id"),
    ])
    func aBadValueIsOneLineAndExit1(flags: [String], says: String) async throws {
        try await expectCLIRefuses(
            ["serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey] + flags,
            says: says)
    }
}
