import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// `serve` logs JSON lines with RFC 3339 timestamps on stderr by default: start, listen, drain, stop.
@Suite(.serialized, .integration) struct RelayLogTests {
    @Test func aDrainedRelayLogsItsLifeInTimestampedJSONLines() async throws {
        let relay = try await startChildRelay(events: false, ["--drain-seconds", "5"])
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let connection = try await TCPFallbackTests.client(.quicOnly).connect(to: address)
        kill(relay.processIdentifier, SIGTERM)
        _ = try await withTimeout(.seconds(10)) { try await connection.relayDraining() }
        await connection.close(code: 0, reason: "moving on")
        let clock = ContinuousClock()
        let left = clock.now
        while relay.isRunning && clock.now - left < .seconds(10) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!relay.isRunning && relay.terminationStatus == 0)

        let lines = await onThread { relay.errorOutput() }.split(separator: "\n")
        let rfc3339 = try NSRegularExpression(pattern: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"#)
        var events: [String] = []
        for line in lines {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            let time = try #require(object["time"] as? String)
            #expect(rfc3339.firstMatch(in: time, range: NSRange(time.startIndex..., in: time)) != nil, "\(time)")
            #expect(["info", "warning", "error"].contains(object["level"] as? String ?? ""))
            events.append(try #require(object["event"] as? String))
        }
        for expected in ["start", "listen", "drain", "stop"] {
            #expect(events.contains(expected), "\(events)")
        }
        #expect(events.firstIndex(of: "listen")! < events.firstIndex(of: "drain")!)
        #expect(!events.contains("datagram"), "no per-datagram lines without --events")
    }

    /// A store that never answers: the relay starts, says so in its log, and refuses 0-RTT.
    @Test func aStoreThatNeverAnswersIsLogged() async throws {
        let relay = try await startChildRelay(events: false, ["--anti-replay", "redis://127.0.0.1:1"])
        kill(relay.processIdentifier, SIGINT)
        let clock = ContinuousClock()
        let started = clock.now
        while relay.isRunning && clock.now - started < .seconds(10) { try await Task.sleep(for: .milliseconds(20)) }
        let log = await onThread { relay.errorOutput() }
        #expect(log.contains(#""event":"anti_replay_store""#) && log.contains(#""state":"never_answered""#), "\(log)")
        #expect(log.contains(#""event":"stop""#), "\(log)")
    }
}
