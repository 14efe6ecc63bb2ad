import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// A relay that crashed and came back tells its listening clients at once (`serve --peer-snapshot`): a phone that
/// only listens sends nothing, so without the snapshot it would keep a connection the new relay never knew until its
/// next keep-alive (15 s by default), its link saying `.ready` all along.
@Suite(.serialized, .integration) struct CrashRecoveryTests {
    /// `serve` on `port` with its keys in `directory`, the snapshot there too when `snapshot`, and `more` options.
    static func serve(
        _ port: UInt16, in directory: URL, snapshot: Bool, _ more: [String] = []
    ) async throws -> ChildServer {
        try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--reset-secret", directory.appendingPathComponent("reset.key").path,
            ] + (snapshot ? ["--peer-snapshot", directory.appendingPathComponent("peers").path] : []) + more)
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
        let (link, before) = try await listeningPhone(port: port)
        defer { link.stop() }
        if snapshot { try await waitUntilListed(before, in: directory) }
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
            echoed = try await withTimeout(.seconds(20)) {
                await after.datagrams.first { _ in true }?.payload == [7, 7]
            }
        }
        return (beforeStillReady, after, echoed)
    }

    /// A phone that only listens (QUIC, the default 15 s keep-alive), connected to the relay on `port`.
    static func listeningPhone(port: UInt16) async throws -> (TransportLink, TransportConnection) {
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                fallback: .quicOnly))
        let link = TransportLink(client: client, to: ServerAddress(host: "127.0.0.1", port: port))
        return (link, try await withTimeout { try await link.nextReady() })
    }

    /// Waits until a peer snapshot in `directory` (the relay's `peers`, or a worker's `peers.worker-N`) lists
    /// `connection`'s address: the relay writes it within a second of the connection.
    static func waitUntilListed(_ connection: TransportConnection, in directory: URL) async throws {
        let port = await connection.statistics().localAddress.split(separator: ":").last.map(String.init) ?? "?"
        try await withTimeout(.seconds(10)) {
            while !snapshots(in: directory).contains(where: { $0.contains(":\(port) ") }) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// The snapshot files in `directory` (the relay's, or each worker's), their text.
    static func snapshots(in directory: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix("peers") && !$0.hasSuffix(".new") }.compactMap {
            try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8)
        }
    }

    @Test func aRestartedRelayResetsItsListeningClientsAtOnce() async throws {
        // Milliseconds in practice (`bench --scenario crash-recovery`); 8 s leaves room for a loaded CI machine and
        // is still well below the 15 s keep-alive a listening phone would wait without the snapshot.
        let (beforeStillReady, after, echoed) = try await Self.crashAndRestart(snapshot: true, within: .seconds(8))
        #expect(after != nil, "within 8 s of the restarted relay listening, the link is on a new connection")
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
