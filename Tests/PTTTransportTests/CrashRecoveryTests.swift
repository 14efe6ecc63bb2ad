import ChildProcesses
import Foundation
import PTTTransport
import Testing

/// A relay that crashed and came back tells its listening clients at once (`serve --peer-snapshot`): a phone that
/// only listens sends nothing, so without the snapshot it would keep a connection the new relay never knew until its
/// next keep-alive (15 s by default), its link saying `.ready` all along.
@Suite(.serialized) struct CrashRecoveryTests {
    static func serve(_ port: UInt16, in directory: URL, snapshot: Bool) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--reset-secret", directory.appendingPathComponent("reset.key").path,
            ] + (snapshot ? ["--peer-snapshot", directory.appendingPathComponent("peers").path] : []))
    }

    /// Connects a listening link (QUIC, the default 15 s keep-alive), kills the relay with SIGKILL once the
    /// snapshot (if any) lists the link's connection, restarts it on the same port and returns the link's
    /// connection `within` after the restarted relay listens: a new one when the relay reset it.
    static func crashAndRestart(
        snapshot: Bool, within: Duration
    ) async throws -> (
        beforeStillReady: Bool, after: TransportConnection?, echoed: Bool
    ) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (port, relay) = try await StablePort.first { port in
            (port, try await serve(port, in: directory, snapshot: snapshot))
        }
        defer { relay.kill() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                fallback: .quicOnly))
        let link = TransportLink(client: client, to: ServerAddress(host: "127.0.0.1", port: port))
        defer { link.stop() }
        let before = try await withTimeout { try await link.nextReady() }
        if snapshot {  // the relay writes it within a second of the connection
            let file = directory.appendingPathComponent("peers").path
            let local = await before.statistics().localAddress
            let port = local.split(separator: ":").last.map(String.init) ?? "?"
            try await withTimeout(.seconds(10)) {
                while !((try? String(contentsOfFile: file, encoding: .utf8))?.contains(":\(port) ") ?? false) {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
        // The handshake's last packets (acknowledgements, HANDSHAKE_DONE's) settle; from here the phone only
        // listens, and sends nothing until its keep-alive.
        try await Task.sleep(for: .milliseconds(1500))
        relay.kill()
        _ = await relay.stop()
        let restarted = try await serve(port, in: directory, snapshot: snapshot)
        defer { restarted.kill() }
        let listening = ContinuousClock.now
        var after: TransportConnection?
        while after == nil && ContinuousClock.now - listening < within {
            try await Task.sleep(for: .milliseconds(5))
            after = link.connection.flatMap { $0 !== before && $0.status == .ready ? $0 : nil }
        }
        let beforeStillReady = before.status == .ready
        var echoed = false
        if let after {  // it hears the relay again: a frame goes round
            try after.sendDatagram([7, 7])
            echoed = try await withTimeout(.seconds(5)) {
                await after.datagrams.first { _ in true }?.payload == [7, 7]
            }
        }
        return (beforeStillReady, after, echoed)
    }

    @Test func aRestartedRelayResetsItsListeningClientsAtOnce() async throws {
        // Milliseconds in practice (`bench --scenario crash-recovery`); 3 s leaves room for a loaded CI machine and
        // is still far below the 15 s keep-alive a listening phone would wait without the snapshot.
        let (beforeStillReady, after, echoed) = try await Self.crashAndRestart(snapshot: true, within: .seconds(3))
        #expect(after != nil, "within 3 s of the restarted relay listening, the link is on a new connection")
        #expect(!beforeStillReady, "the forgotten connection is not ready any more")
        #expect(echoed, "the new connection carries audio")
    }

    /// The control: without the snapshot the listening link keeps the forgotten connection and says it is ready.
    @Test func withoutTheSnapshotAListeningClientStaysOnAConnectionTheRelayForgot() async throws {
        let (beforeStillReady, after, _) = try await Self.crashAndRestart(snapshot: false, within: .seconds(2))
        #expect(after == nil)
        #expect(beforeStillReady)
    }

    @Test func aSnapshotWithoutAResetSecretIsAConfigurationError() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.peerSnapshotFile =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "ptt-peers-\(UUID().uuidString)"
            ).path
        await #expect {
            _ = try await TransportServer.bind(configuration: configuration)
        } throws: { error in
            (error as? TransportError)?.code == .invalidConfiguration
        }
    }
}
