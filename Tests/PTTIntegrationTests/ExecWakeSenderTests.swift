import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// `serve --wake-exec`'s sender: one JSON object per burst on the command's stdin; a command that hangs, floods its
/// output or fails is killed or counted, on a thread of its own.
@Suite("Wake hook: running a command per burst", .serialized, .integration)
struct ExecWakeSenderTests {
    static let request = WakeRequest(
        group: "dispatch", burst: 0x0102_0304_0506_0708, talker: try! MemberIdentity("alice"),
        relay: RelayIdentity(serverName: "relay.example", port: 4433, quicLBServerID: [0xAB]),
        members: [
            WakeTarget(identity: try! MemberIdentity("bob"), address: try! WakeAddress(platform: .apns, token: "b0b")),
            WakeTarget(
                identity: try! MemberIdentity("carol"), address: try! WakeAddress(platform: .fcm, token: "c4r0l")),
        ])

    static func temporaryFile() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("ptt-hook-\(UUID().uuidString)").path
    }

    @Test func theCommandReadsOneJSONObjectPerBurst() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await ExecWakeSender(command: "cat > '\(file)'").wake(Self.request)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.hasSuffix("}\n") && text.split(separator: "\n").count == 1)
        let object = try #require(jsonObject(text))
        #expect(object["group"] as? String == "dispatch")
        #expect(object["burst"] as? String == "0102030405060708")
        #expect(object["talker"] as? String == "alice")
        let relay = try #require(object["relay"] as? [String: Any])
        #expect(relay["server_name"] as? String == "relay.example" && relay["port"] as? Int == 4433)
        #expect(relay["quic_lb_server_id"] as? String == "ab")
        let members = try #require(object["members"] as? [[String: Any]])
        #expect(members.map { $0["user"] as? String } == ["bob", "carol"])
        #expect(members.map { $0["push_token"] as? String } == ["b0b", "c4r0l"])
        #expect(members.map { $0["platform"] as? String } == ["apns", "fcm"])
        let ticket = try WakeTicket(base64URL: try #require(object["ticket"] as? String))
        #expect(ticket == Self.request.ticket)
    }

    @Test func aCommandThatHangsIsKilledAtTheTimeout() async throws {
        let started = ContinuousClock.now
        let sleep = "sleep 59.\(Int.random(in: 1000...9999))"  // a command line no other process has
        await #expect(throws: ExecWakeSender.Failure.self) {
            try await ExecWakeSender(command: "\(sleep); true", timeout: .milliseconds(300)).wake(Self.request)
        }
        #expect(ContinuousClock.now - started < .seconds(30), "killed, not waited for")
        #expect(await eventually(within: .seconds(20)) { Self.running(sleep).isEmpty }, "no sleep left behind")
    }

    /// Processes whose command line contains `marker` (read from /proc).
    static func running(_ marker: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return line.contains(marker) ? line : nil
        }
    }

    @Test func aCommandThatFloodsItsOutputOrIgnoresItsInputIsHandled() async throws {
        // Output is discarded (it cannot fill a pipe the relay reads); the flood runs until the timeout kills it —
        // the shell and what it started (its process group), not the shell alone.
        let marker = "flood-\(UUID().uuidString)"
        await #expect(throws: ExecWakeSender.Failure.self) {
            try await ExecWakeSender(command: "yes \(marker) | cat > /dev/null", timeout: .milliseconds(300))
                .wake(Self.request)
        }
        #expect(await eventually(within: .seconds(20)) { Self.running(marker).isEmpty }, "\(Self.running(marker))")
        // A command that exits without reading its input: no SIGPIPE reaches this process.
        try await ExecWakeSender(command: "exit 0").wake(Self.request)
    }

    @Test func aFailingCommandIsAFailure() async throws {
        await #expect(throws: ExecWakeSender.Failure.self) {
            try await ExecWakeSender(command: "exit 3").wake(Self.request)
        }
        await #expect(throws: ExecWakeSender.Failure.self) {
            try await ExecWakeSender(command: "/nonexistent/hook").wake(Self.request)
        }
    }
}
