import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// SIGHUP to `serve`: the certificate and key are read again; a connection already open keeps echoing, new
/// handshakes (QUIC and TCP) see the new certificate, and files that do not load leave the relay as it was.
@Suite(.serialized, .integration) struct HangupReloadTests {
    private static func client(_ policy: FallbackPolicy, ca: String) -> TransportClient {
        TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(ca), handshakeTimeout: .seconds(5), fallback: policy))
    }

    private static func echoes(_ connection: TransportConnection) async throws {
        try connection.sendDatagram([7, 7, 7])
        try await withTimeout(.seconds(10)) {
            for await _ in connection.datagrams { break }
        }
    }

    private static func install(_ name: String, into directory: URL) throws {
        for (from, to) in [("\(name).pem", "cert.pem"), ("\(name).key", "key.pem")] {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(Fixtures.root)/certs/\(from)"))
            try data.write(to: directory.appendingPathComponent(to), options: .atomic)
        }
    }

    @Test func aLiveCallKeepsEchoingAndNewHandshakesSeeTheNewCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-hup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.install("server", into: directory)
        let relay = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", directory.appendingPathComponent("cert.pem").path,
                "--key", directory.appendingPathComponent("key.pem").path,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path,
                "--token-secret", directory.appendingPathComponent("token.secret").path,
            ])
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let call = try await Self.client(.quicOnly, ca: Fixtures.ca).connect(to: address)
        try await Self.echoes(call)

        try Self.install("untrusted", into: directory)  // a leaf of another CA
        kill(relay.processIdentifier, SIGHUP)
        let otherCA = "\(Fixtures.root)/certs/other-ca.pem"
        var reloaded = false
        for _ in 0..<100 where !reloaded {
            reloaded = (try? await Self.client(.quicOnly, ca: otherCA).connect(to: address)) != nil
            if !reloaded { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(reloaded, "a new QUIC handshake sees the new certificate")
        #expect(relay.isRunning, "SIGHUP does not end the relay")
        _ = try await Self.client(.tcpOnly, ca: otherCA).connect(to: address)  // the TCP listener's too
        await #expect(throws: TransportError.self) {
            _ = try await Self.client(.quicOnly, ca: Fixtures.ca).connect(to: address)
        }
        try await Self.echoes(call)  // the call started under the old certificate carries on

        // A certificate file that does not load: logged, and the relay keeps what it had.
        try Data("not a certificate".utf8).write(to: directory.appendingPathComponent("cert.pem"))
        kill(relay.processIdentifier, SIGHUP)
        try await Task.sleep(for: .milliseconds(300))
        #expect(relay.isRunning)
        _ = try await Self.client(.quicOnly, ca: otherCA).connect(to: address)
        try await Self.echoes(call)
        await call.close(code: 0, reason: "done")
        kill(relay.processIdentifier, SIGINT)
        while relay.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        let log = await onThread { relay.errorOutput() }
        #expect(log.contains(#""event":"reload""#) && log.contains(#""event":"reload_failed""#), "\(log)")
    }
}
