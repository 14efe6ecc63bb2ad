import Foundation
import TestSupport
import Testing

@testable import PTTMatrix

/// The matrix's QMux cases on loopback: our client against our relay (each must pass), and moq-dev's QMux (the
/// moq-ffi wheel, Tests/Peers/moq_qmux_peer.py) against ours both ways, each cell with the verdict the interop
/// matrix documents (InteropMatrix.md). Without moq-ffi the moq-dev cells are skipped, unless PTT_REQUIRE_PEERS is
/// set (CI), where a missing peer fails.
@Suite("Interop matrix, QMux cases (ours and moq-dev's)", .serialized, .integration)
struct QMuxInteropMatrixTests {
    static func run(_ testCase: MatrixCase, _ pairing: Pairing) async throws -> MatrixCell? {
        var options = MatrixSubsetTests.options([testCase])
        options.pairings = [pairing]
        let cells = await Matrix.run(options)
        let cell = try #require(cells.first)
        #expect(cells.count == 1 && cell.testCase == testCase && cell.pairing == pairing)
        #expect(!cell.figure.isEmpty)
        if pairing.isMoq && cell.verdict == .unsupported && cell.figure.hasPrefix("moq-ffi is not importable") {
            #expect(!MatrixSubsetTests.requirePeers, "PTT_REQUIRE_PEERS is set: \(cell.figure)")
            print("skipped: \(cell.figure)")
            return nil
        }
        return cell
    }

    @Test(arguments: MatrixCase.qmux)
    func oursAgainstOurs(_ testCase: MatrixCase) async throws {
        guard let cell = try await Self.run(testCase, .ours) else { return }
        #expect(cell.verdict == .pass, "\(testCase.rawValue): \(cell.figure)")
    }

    /// moq-dev's client through the bridge: the handshake and the stream pass; the datagram is unsupported (their
    /// binding has no datagram API below MoQ) but ours must reach them without a QMux error.
    @Test(arguments: MatrixCase.qmux)
    func theirClientAgainstOurRelay(_ testCase: MatrixCase) async throws {
        guard let cell = try await Self.run(testCase, .moqClient) else { return }
        if testCase == .qmuxDatagram {
            #expect(cell.verdict == .unsupported, "\(cell.verdict.rawValue): \(cell.figure)")
            #expect(cell.figure.contains("taken by their QMux with no error"), "\(cell.figure)")
        } else {
            #expect(cell.verdict == .pass, "\(testCase.rawValue): \(cell.verdict.rawValue) — \(cell.figure)")
        }
    }

    /// moq-ffi's server listens for QUIC only: every cell says so, from the probe.
    @Test func ourClientAgainstTheirServer() async throws {
        guard let cell = try await Self.run(.qmuxHandshake, .moqServer) else { return }
        #expect(cell.verdict == .unsupported, "\(cell.verdict.rawValue): \(cell.figure)")
        #expect(cell.figure.contains("accepts QUIC only"), "\(cell.figure)")
    }

    /// aioquic has no QMux; moq-dev's pairings run no QUIC case. Both answer at once, with the reason.
    @Test func pairingsWithoutTheCaseSayWhy() async throws {
        for (testCase, pairing) in [(MatrixCase.qmuxStream, Pairing.aioquicServer), (.handshake, .moqClient)] {
            var options = MatrixSubsetTests.options([testCase])
            options.pairings = [pairing]
            let cell = try #require(await Matrix.run(options).first)
            #expect(cell.verdict == .unsupported, "\(testCase.rawValue) \(pairing.rawValue): \(cell.figure)")
        }
    }

    /// What the peer script prints is input: garbage or a failed run becomes a failed cell with the reason, never
    /// a crash or a pass.
    @Test func garbageFromThePeerScriptFailsTheCell() async throws {
        var options = MatrixSubsetTests.options([.qmuxStream])
        options.pairings = [.moqClient]
        // `echo` prints its arguments: not JSON.
        let echoing = MoqPeers(python: "/bin/echo", script: "not-json")
        await #expect(throws: MatrixError.self) {
            _ = try await echoing.runClient(relayPort: 1, options: options, direct: false, timeout: 1)
        }
        // `false` exits 1.
        await #expect(throws: MatrixError.self) {
            _ = try await MoqPeers(python: "/bin/false", script: "x").probeServer()
        }
        // Well-formed JSON that saw no connection: a failed cell that says so.
        let empty = #"{"mode": "bridged", "url": "tcp://127.0.0.1:1", "connect": {"ok": false, "error": "refused"}}"#
        let run = try JSONDecoder().decode(MoqClientRun.self, from: Data(empty.utf8))
        for testCase in MatrixCase.qmux {
            let outcome = MoqJudgement(run: run, relayPaths: [], relayEnd: "-").judge(testCase, direct: nil)
            #expect(outcome.verdict == .fail && outcome.figure.contains("refused"), "\(outcome.figure)")
        }
    }
}
