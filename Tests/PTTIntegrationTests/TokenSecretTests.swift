import ChildProcesses
import Foundation
import TestSupport
import Testing

/// `serve --retry --token-secret FILE`: a phone's NEW_TOKEN from one relay is valid at every relay sharing the file
/// (no Retry there), and at a relay with another secret it pays the Retry. Two CLI relays on one port of two
/// loopback addresses stand for two hosts of one name; the phone is the CLI's `connect` with a session file.
@Suite(.serialized, .integration) struct TokenSecretTests {
    private func retries(_ admin: String) throws -> Int {
        let body = try adminGet(admin, "/metrics").body
        let line = try #require(
            body.split(separator: "\n").first { $0.hasPrefix("ptt_relay_quic_retries_sent_total ") })
        return try #require(Int(line.split(separator: " ")[1]))
    }

    private func relay(
        _ host: String, port: UInt16, secret: String, ticketKey: String
    ) async throws -> (
        ChildServer, String
    ) {
        let relay = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "\(host):\(port)", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--retry", "--token-secret", secret, "--ticket-key", ticketKey, "--admin", "127.0.0.1:0",
            ])
        let line = try #require(await relay.line(startingWith: "admin on ", within: .seconds(10)))
        return (relay, String(line.dropFirst("admin on ".count)))
    }

    @Test(arguments: [true, false])
    func aTokenFromOneRelayIsValidAtEveryRelaySharingTheSecret(shared: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = directory.appendingPathComponent("token.secret").path
        let ticketKey = directory.appendingPathComponent("ticket.key").path
        let (first, firstAdmin) = try await relay("127.0.0.2", port: 0, secret: secret, ticketKey: ticketKey)
        defer { first.stopNow() }
        let port = try #require(UInt16(first.address.split(separator: ":").last ?? ""))
        let (second, secondAdmin) = try await relay(
            "127.0.0.3", port: port, secret: shared ? secret : directory.appendingPathComponent("other").path,
            ticketKey: ticketKey)
        defer { second.stopNow() }

        let session = directory.appendingPathComponent("session").path
        func connect(_ address: String) async throws -> ProgramResult {
            try await runProgram(
                Subprocess.cli,
                [
                    "connect", "localhost:\(port)", "--ca", Fixtures.ca, "--session-file", session, "--json",
                    "--resolve", "localhost:\(port):\(address)", "--datagrams", "3",
                ])
        }
        let cold = try await connect("127.0.0.2")
        #expect(cold.status == 0, "\(cold.stderr)")
        // At least one: a first flight the phone sent again before the Retry came (a loaded machine) earns another.
        #expect(try retries(firstAdmin) >= 1, "the first relay validated the new phone with a Retry")
        let warm = try await connect("127.0.0.3")
        #expect(warm.status == 0, "\(warm.stderr)")
        // The CLI's audio expires after 100 ms unsent, as audio should, and a loaded machine may starve the loop that
        // long: one echo proves datagrams flow in the call; all of them is a quiet machine's figure.
        #expect((1...3).contains(jsonObject(warm.stdout)?["datagrams_echoed"] as? Int ?? 0), "\(warm.stdout)")
        let secondRetries = try retries(secondAdmin)
        #expect(
            shared ? secondRetries == 0 : secondRetries >= 1,
            shared ? "the token of the first relay was valid at the second" : "another secret: a Retry")
    }
}
