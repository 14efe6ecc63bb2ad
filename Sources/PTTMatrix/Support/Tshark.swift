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
        let run = try await runProgram(
            path,
            [
                "-r", capture, "-Y", "quic", "-T", "fields", "-E", "separator=/t", "-e", "ip.src", "-e",
                "quic.long.packet_type", "-e", "quic.packet_number",
            ], timeout: 60)
        guard !run.signaled && run.status == 0 else {
            throw MatrixError("tshark failed: \(run.stderr.suffix(200))")
        }
        var before: [Int] = []
        var after: [Int] = []
        var sawRetry = false
        for line in run.stdout.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 3 else { continue }
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
}
