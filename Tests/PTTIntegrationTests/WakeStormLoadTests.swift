import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// The wake-storm load generator (`ptt-lab wake-storm-load`, the bench's child) against a real relay: every
/// phone resumes in 0-RTT and is answered, every phone is still connected when the result is printed (a woken phone
/// stays to hear the burst), and all hang up before the program exits.
@Suite("wake-storm-load: every phone answered in 0-RTT, connected until the result, then gone", .integration)
struct WakeStormLoadTests {
    @Test func everyPhoneIsAnsweredAndStaysConnectedUntilTheResult() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.perSourceLimits = nil  // one host plays every phone
        let server = try await TransportServer.bind(configuration: configuration)
        let log = PolledLog<[(early: Bool, remote: String)]>([])  // 0-RTT joins echoed and connections closed
        let relay = Task {
            await EchoRelay.run(server) { event in
                switch event {
                case .message(let remote, _, _, isEarly: true): log.update { $0.append((true, remote)) }
                case .closed(let remote, _): log.update { $0.append((false, remote)) }
                default: break
                }
            }
        }
        defer { relay.cancel() }
        let phones = 8
        let load = try await ChildServer.start(
            Subprocess.lab,
            [
                "wake-storm-load", "--relay", server.quicAddress!.description, "--ca", Fixtures.ca, "--clients",
                "\(phones)",
                "--loops", "2",
            ],
            readyWithin: .seconds(60))  // "listening on" once every phone saved its state
        defer { load.stopNow() }

        let line = try #require(await load.line(startingWith: "result ", within: .seconds(60)))
        let result = try #require(jsonObject(String(line.dropFirst("result ".count))))
        let answers = try #require(result["answers_ms"] as? [Double])
        #expect(answers.count == phones, "\(line)")
        #expect(answers == answers.sorted() && answers.allSatisfy { $0 > 0 })
        #expect(result["early_accepted"] as? Int == phones, "every phone's join was accepted in 0-RTT: \(line)")
        #expect(result["failed"] as? Int == 0)
        #expect((result["cpu_s"] as? Double ?? 0) > 0)
        #expect(await load.line(startingWith: "closed \(phones)", within: .seconds(30)) != nil)
        // Each phone's first connection (saving its state) and its woken one.
        #expect(await log.waitFor(.seconds(10)) { $0.filter { !$0.early }.count == 2 * phones })
        let events = log.snapshot
        let woken = Set(events.filter(\.early).map(\.remote))
        #expect(woken.count == phones)
        let lastJoin = try #require(events.lastIndex { $0.early })
        let firstHangUp = try #require(events.firstIndex { !$0.early && woken.contains($0.remote) })
        #expect(lastJoin < firstHangUp, "a woken phone hung up before every phone was answered")
        _ = await load.stop(within: 10)
        var remaining = await server.connectionCount()
        for _ in 0..<100 where remaining > 0 {  // each closed connection leaves after its closing period
            try await Task.sleep(for: .milliseconds(50))
            remaining = await server.connectionCount()
        }
        #expect(remaining == 0, "every phone hung up")
        await server.shutdown()
    }
}
