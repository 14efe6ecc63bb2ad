import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// Issue 36, item 5: `serve --reset-secret FILE --previous-reset-secret FILE` and the reset secret reloaded on
/// SIGHUP. A call from before the rotation carries on across the SIGHUP; the relay then dies (SIGKILL) and comes back
/// with the same files, and the call's next packet draws the reset its client holds (from the old secret) at once.
@Suite(.serialized, .integration) struct ResetSecretRotationCLITests {
    static func write32(_ url: URL) throws {
        var generator = SystemRandomNumberGenerator()
        try Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: url)
    }

    static func serve(_ port: UInt16, in directory: URL) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--reset-secret", directory.appendingPathComponent("reset.secret").path,
                "--previous-reset-secret", directory.appendingPathComponent("reset.secret.previous").path,
                "--admin", "127.0.0.1:0",
            ])
    }

    /// The admin address the relay printed.
    static func admin(_ relay: ChildServer) async throws -> String {
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        return String(line.dropFirst("admin on ".count))
    }

    /// SIGHUP, then waits until `/metrics` counts it under `result` (a reload is done, or refused, when counted).
    static func hangUp(_ relay: ChildServer, admin: String, result: String) async throws {
        let before = try reloads(admin, result)
        kill(relay.processIdentifier, SIGHUP)
        try await withTimeout(.seconds(10)) {
            while try reloads(admin, result) == before { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    /// `ptt_relay_reloads_total{result=…}` as `/metrics` serves it now (-1: missing).
    static func reloads(_ admin: String, _ result: String) throws -> Int {
        let sample = #"ptt_relay_reloads_total{result="\#(result)"} "#
        let text = try adminGet(admin, "/metrics").body
        let line = text.split(separator: "\n").first { $0.hasPrefix(sample) }
        return line.flatMap { Int($0.dropFirst(sample.count)) } ?? -1
    }

    @Test func aCallFromBeforeTheRotationIsResetAtOnceAfterAReloadAndACrash() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-rot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let current = directory.appendingPathComponent("reset.secret")
        let previous = directory.appendingPathComponent("reset.secret.previous")
        try Self.write32(current)
        try FileManager.default.copyItem(at: current, to: previous)  // the first start: no rotation yet
        let (port, relay) = try await StablePort.first { port in (port, try await Self.serve(port, in: directory)) }
        var restarted: ChildServer?
        defer {
            relay.kill()
            restarted?.kill()
        }
        let admin = try await Self.admin(relay)
        let address = ServerAddress(host: "127.0.0.1", port: port)
        let client = TransportClient(configuration: TransportLinkTests.configuration(.quicOnly))
        let call = try await HostilePeerTests.Call(address, client: client)
        #expect(try await call.roundTrip("before"))

        // Rotation: the old secret becomes the previous one, a new one is written, SIGHUP.
        #expect(rename(current.path, previous.path) == 0)
        try Self.write32(current)
        try await Self.hangUp(relay, admin: admin, result: "ok")
        #expect(try await call.roundTrip("across the reload"))
        #expect(call.connection.status == .ready)

        // A previous file that does not load: refused, counted, nothing changed.
        let saved = try Data(contentsOf: previous)
        try Data("short".utf8).write(to: previous)
        try await Self.hangUp(relay, admin: admin, result: "failed")
        #expect(try await call.roundTrip("after a failed reload"))
        try saved.write(to: previous)

        // The relay dies and comes back with the rotated files: the old call's reset is the old secret's.
        relay.kill()
        _ = await relay.stop()
        restarted = try await Self.serve(port, in: directory)
        try? await call.stream.send([0xff])
        let reason = try await withTimeout(.seconds(20)) { try await call.connection.closed() }
        #expect(reason.error.code == .connectionReset, "\(reason)")
    }

    @Test func aBadPreviousResetSecretIsRefusedAtStart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-rot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let reset = directory.appendingPathComponent("reset.secret").path
        let previous = directory.appendingPathComponent("previous")
        let base = [
            "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
        ]
        try await expectCLIRefuses(
            base + ["--reset-secret", reset, "--previous-reset-secret", previous.path], says: "cannot read")
        try Data([1, 2, 3]).write(to: previous)
        try await expectCLIRefuses(
            base + ["--reset-secret", reset, "--previous-reset-secret", previous.path], says: "must hold exactly 32")
        try Data(count: 32).write(to: previous)
        try await expectCLIRefuses(
            base + ["--previous-reset-secret", previous.path], says: "needs statelessResetSecretFile")
    }
}
