import ChildProcesses
import Foundation

/// Reading a path's capture with tshark, which decrypts QUIC Initial packets without any key (their keys come from
/// the client's first destination connection ID): the packet numbers a header-protection-blind count cannot see.
enum Tshark {
    static let path = "/usr/bin/tshark"

    static var available: Bool { FileManager.default.isExecutableFile(atPath: path) }

    /// The packet numbers of the client's Initial packets (sent from `client`) before and after the server's
    /// first Retry; nil when tshark is missing or finds no Retry.
    static func initialPacketNumbersAroundRetry(
        capture: String, client: String
    ) async throws
        -> (before: [Int], after: [Int])?
    {
        guard available else { return nil }
        var before: [Int] = []
        var after: [Int] = []
        var sawRetry = false
        for fields in try await rows(
            capture, filter: "quic", ["ip.src", "quic.long.packet_type", "quic.packet_number"])
        {
            let types = fields[1].split(separator: ",")
            if fields[0] != client {
                if types.contains("3") { sawRetry = true }
                continue
            }
            // The Initial comes first in a coalesced datagram, and tshark can always decrypt it.
            guard types.first == "0", let number = fields[2].split(separator: ",").first.flatMap({ Int($0) }) else {
                continue
            }
            if sawRetry { after.append(number) } else { before.append(number) }
        }
        return sawRetry ? (before, after) : nil
    }

    /// The cipher suites the client's ClientHellos offered (decrypted from its Initial packets), e.g. ["0x1303"];
    /// nil when tshark is missing.
    static func offeredCipherSuites(capture: String) async throws -> Set<String>? {
        guard available else { return nil }
        let rows = try await rows(capture, filter: "tls.handshake.type == 1", ["tls.handshake.ciphersuite"])
        return Set(rows.flatMap { $0[0].split(separator: ",").map(String.init) })
    }

    /// Whether 1-RTT packets in key phase 1 came from the client (sent from `client`) and from the server, read
    /// from `capture` decrypted with `keyLog` (the key phase bit is header-protected: without the keys nobody sees
    /// it); nil when tshark is missing.
    static func keyPhaseOne(
        capture: String, keyLog: String, client: String
    ) async throws -> (
        client: Bool, server: Bool
    )? {
        try await eachSide(capture, keyLog: keyLog, client: client, matching: "quic.short && quic.key_phase == 1")
    }

    /// Whether ACK frames carrying ECN counts (ACK_ECN) came from the client (sent from `client`) and from the
    /// server, read from `capture` decrypted with `keyLog`; nil when tshark is missing.
    static func ackECNCounts(
        capture: String, keyLog: String, client: String
    ) async throws -> (
        client: Bool, server: Bool
    )? {
        try await eachSide(capture, keyLog: keyLog, client: client, matching: "quic.ack.ect0_count")
    }

    /// Whether packets matching the display `filter` came from the client (sent from `client`) and from the
    /// server, in `capture` decrypted with `keyLog`; nil when tshark is missing.
    private static func eachSide(
        _ capture: String, keyLog: String, client: String, matching filter: String
    ) async throws -> (client: Bool, server: Bool)? {
        guard available else { return nil }
        let rows = try await rows(
            capture, filter: filter, ["ip.src"], options: ["-o", "tls.keylog_file:\(keyLog)"])
        return (rows.contains { $0[0] == client }, rows.contains { $0[0] != client })
    }

    /// `fields` of each packet of `capture` that matches the display `filter` (several values comma-separated).
    private static func rows(
        _ capture: String, filter: String, _ fields: [String], options: [String] = []
    ) async throws -> [[String]] {
        let run = try await runProgram(
            path,
            options + ["-r", capture, "-Y", filter, "-T", "fields", "-E", "separator=/t"]
                + fields.flatMap { ["-e", $0] },
            timeout: 60)
        guard !run.signaled && run.status == 0 else {
            throw MatrixError("tshark failed: \(run.stderr.suffix(200))")
        }
        return run.stdout.split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }.filter { $0.count == fields.count }
    }
}
