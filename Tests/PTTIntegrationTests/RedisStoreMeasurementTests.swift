import ChildProcesses
import Foundation
import TestSupport
import Testing

/// Issue 31, item 5, measured on this machine (the figures are printed as `measure:` lines) and asserted as counts
/// with generous bounds: with Redis 2 ms away (each way, a delaying proxy) at least 29 of 30 wakes, one after the
/// other, are in 0-RTT with the default deadline; with Redis 4 ms away a call on the relay's only event loop keeps
/// its audio flowing during a 300-phone wake storm.
///
/// Measurements, not part of the suite's run: they take a core for most of a minute, which starves the tests
/// running beside them, and the default 20 ms deadline is a production figure a machine running the whole suite in
/// parallel does not keep. Run them alone: `PTT_MEASURE=1 swift test --filter RedisStoreMeasurementTests`, with
/// `PTT_CLI=.build/release/ptt-transport` for a release build's relay and phones. (The
/// loop's responsiveness is asserted in the suite by `RedisLoopTests`, against a Redis 2 s away.)
@Suite(
    "0-RTT anti-replay on Redis: measured", .serialized,
    .enabled(if: ProcessInfo.processInfo.environment["PTT_MEASURE"] != nil, "a measurement: PTT_MEASURE=1"),
    .enabled(if: RedisTestServer.available || peersRequired), .integration)
struct RedisStoreMeasurementTests {
    @Test func atLeast29Of30WakesInZeroRTTWithRedis2MillisecondsAway() async throws {
        // The default deadline.
        let fleet = try await RedisLoopTests.proxiedRelay(deadlineMilliseconds: nil, delay: .milliseconds(2))
        let (relay, output) = (fleet.relay, fleet.output)
        var outcomes: [String] = []
        for phone in 0..<30 {
            let session = fleet.path("phone-\(phone).bin")
            #expect(
                try await RedisAntiReplayTests.wake(relay.address, "quic", session: session)["resumed"] as? Bool
                    == false)
        }
        try await Task.sleep(for: .milliseconds(1100))  // tickets issued in the marker's second
        for phone in 0..<30 {
            let wake = try await RedisAntiReplayTests.wake(
                relay.address, "quic", session: fleet.path("phone-\(phone).bin"))
            outcomes.append(wake["early_data"] as? String ?? "")
        }
        let accepted = outcomes.filter { $0 == "accepted" }.count
        let counters = await output.counters() ?? [:]
        print("measure: \(accepted) of 30 wakes in 0-RTT with Redis 2 ms away (each way); relay's counters \(counters)")
        #expect(accepted >= 29, "\(outcomes)")
    }

    @Test func aCallKeepsFlowingDuringA300PhoneWakeStormWithRedis4MillisecondsAway() async throws {
        let fleet = try await RedisLoopTests.proxiedRelay(deadlineMilliseconds: nil, delay: .milliseconds(4))
        let (relay, output) = (fleet.relay, fleet.output)
        let cpuBefore = CPUTime.process(relay.processIdentifier)
        async let call = RedisLoopTests.call(relay, seconds: 40)
        let storm = try await RedisLoopTests.storm(relay, output, phones: 300)
        let result = try await call
        let gap = result.longestGap
        let answers = (storm["answers_ms"] as? [Double] ?? []).sorted()
        let accepted = storm["early_accepted"] as? Int ?? 0
        print(
            "measure: 300-phone wake storm, Redis 4 ms away (each way), one event loop: \(accepted) woke in 0-RTT, "
                + "answers p50 \(answers.isEmpty ? 0 : answers[answers.count / 2]) ms, max \(answers.last ?? 0) ms; "
                + "the call's longest gap \(gap) ms, echoed \(result.echoed); relay CPU "
                + "\(CPUTime.process(relay.processIdentifier) - cpuBefore) s; counters \(await output.counters() ?? [:])"
        )
        #expect(storm["failed"] as? Int == 0)
        #expect(accepted >= 290, "\(accepted) of 300 in 0-RTT")
        #expect(gap < 1000, "the call kept flowing: longest gap \(gap) ms")
    }
}
