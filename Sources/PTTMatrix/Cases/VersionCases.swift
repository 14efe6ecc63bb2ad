import NetworkEmulation
import PTTTransport
import TransportIO

/// The case about QUIC versions, judged from the long headers' version fields (`QUICWireTally`) and from what each
/// connection reported.
enum VersionCases {
    /// Two connections, the second resuming the first's session with its join message in 0-RTT. Each client starts
    /// in v1 and offers v2 (ours by default, aioquic's with `--quic-version both`); the server moves the first to v2
    /// by compatible negotiation (RFC 9368), visible on the wire as v1 client Initials answered in v2 (our relay with
    /// `prefersQUICVersion2`: by default it keeps each client in its version). Our client starts the second in v2,
    /// the version its ticket was issued in (RFC 9369 §5).
    static func v2(_ run: CaseRun) async throws -> Outcome {
        guard LinkedLibraries.supportsQUICVersion2 else {
            return .unsupported(
                "QUIC v2 (RFC 9369) needs ngtcp2 1.0 or later; this build runs ngtcp2 \(LinkedLibraries.ngtcp2), "
                    + "which knows only a provisional v2 codepoint from the drafts")
        }
        let server = try await run.startServer { $0.prefersQUICVersion2 = true }
        let visits = try await run.using(server) {
            try await run.visits(
                server, count: 2, resume: true, early: true, aioquicArguments: ["--quic-version", "both"])
        }
        let wire = run.path.network.wire
        func count(_ tally: [UInt32: Int]) -> String {
            "v1 \(tally[QUICWireTally.versionOne] ?? 0), v2 \(tally[QUICWireTally.versionTwo] ?? 0)"
        }
        let versions = visits.map { $0.quicVersion.map { "v\($0)" } ?? "unknown" }
        let startedInV1 = wire.clientFirstVersion == QUICWireTally.versionOne
        let serverMoved = (wire.serverPacketsByVersion[QUICWireTally.versionTwo] ?? 0) > 0
        return MatrixCell.judged(
            visits.allSatisfy { $0.ok && $0.quicVersion == .version2 } && visits.last?.resumed == true
                && startedInV1 && serverMoved && wire.handshakes == 2,
            "\(CaseRun.describe(visits)), versions \(versions.joined(separator: ", ")), 2nd resumed: "
                + "\(visits.last?.resumed == true), 0-RTT accepted: \(visits.last?.earlyAccepted == true); wire: "
                + "long-header packets client \(count(wire.clientPacketsByVersion)) (the first in "
                + "\(wire.clientFirstVersion == QUICWireTally.versionTwo ? "v2" : "v1")), server "
                + "\(count(wire.serverPacketsByVersion)), \(wire.handshakes) handshakes")
    }
}
