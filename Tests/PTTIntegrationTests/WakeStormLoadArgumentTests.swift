import TestSupport
import Testing

/// The wake-storm load generator (`ptt-lab wake-storm-load`, the bench's child): a bad count is one clear
/// line on stderr and exit 1, before it connects anywhere.
@Suite("wake-storm-load's flags: bad values are a clear error", .integration)
struct WakeStormLoadArgumentTests {
    @Test(arguments: [
        (["--loops", "0"], "--loops must be at least 1"),
        (["--loops", "two"], "--loops takes a non-negative whole number, not two"),
        (["--clients", "0"], "--clients must be at least 1"),
        (["--clients", "-5"], "--clients takes a non-negative whole number, not -5"),
    ])
    func aBadValueIsOneLineAndExit1(flags: [String], says: String) async throws {
        try await expectCLIRefuses(
            ["wake-storm-load", "--relay", "127.0.0.1:9", "--ca", Fixtures.ca] + flags, says: says,
            program: Subprocess.lab)
    }
}

/// `ptt-lab bench --fanout-listeners`: a bad count list is one clear line on stderr and exit 1, before anything runs.
@Suite("bench --fanout-listeners: bad values are a clear error", .integration)
struct FanoutListenersArgumentTests {
    @Test(arguments: ["0", "abc", "10,x", "-5", "16001", ","])
    func aBadListIsOneLineAndExit1(value: String) async throws {
        try await expectCLIRefuses(
            ["bench", "--scenario", "capacity-fanout", "--fanout-listeners", value],
            says: "--fanout-listeners takes counts of 1 to 16000, e.g. 500,1000", program: Subprocess.lab)
    }
}
