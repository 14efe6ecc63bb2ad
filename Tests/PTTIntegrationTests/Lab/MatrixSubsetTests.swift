import Foundation
import PTTMatrix
import PTTTransport
import TestSupport
import Testing

/// The matrix cases that finish in seconds, our client against our relay on the emulated path: each must pass
/// (or, for a feature not built yet, report unsupported with its reason, never pass).
@Suite("Interop matrix subset (our client, our relay)", .serialized, .integration)
struct MatrixSubsetTests {
    static let unavailable = Matrix.unavailableReason()
    static let requirePeers = ProcessInfo.processInfo.environment["PTT_REQUIRE_PEERS"] != nil

    /// Every quick case passes (keyupdate reads the key phase with tshark, which CI installs); v2 only where the
    /// linked ngtcp2 speaks it (1.x): on 0.12.1 it reports unsupported with the reason.
    static let expectedToPass: [MatrixCase] = MatrixCase.quick.filter {
        $0 != .v2 || LinkedLibraries.supportsQUICVersion2
    }

    static var packageRoot: String { Fixtures.root }

    static func options(_ cases: [MatrixCase]) -> MatrixOptions {
        var options = MatrixOptions()
        options.cases = cases
        options.pairings = [.ours]
        options.connections = 10  // the lossy handshake case with fewer connections than the runner's 50
        options.packageRoot = packageRoot
        options.certificate = "\(packageRoot)/certs/server.pem"
        options.privateKey = "\(packageRoot)/certs/server.key"
        options.certificateAuthority = "\(packageRoot)/certs/ca.pem"
        options.certificateAuthorityKey = "\(packageRoot)/certs/ca.key"
        return options
    }

    @Test(arguments: MatrixCase.quick)
    func quickCase(_ testCase: MatrixCase) async throws {
        if let reason = Self.unavailable {
            #expect(!Self.requirePeers, "PTT_REQUIRE_PEERS is set but emulation is unavailable: \(reason)")
            print("skipped: emulation unavailable: \(reason)")
            return
        }
        let cells = await Matrix.run(Self.options([testCase]))
        let cell = try #require(cells.first)
        #expect(cells.count == 1 && cell.testCase == testCase && cell.pairing == .ours)
        #expect(!cell.figure.isEmpty)
        if Self.expectedToPass.contains(testCase) {
            #expect(cell.verdict == .pass, "\(testCase.rawValue): \(cell.verdict.rawValue) — \(cell.figure)")
        } else {
            #expect(cell.verdict == .unsupported, "\(testCase.rawValue): \(cell.verdict.rawValue) — \(cell.figure)")
        }
    }

    @Test func reportListsEveryCellAndItsFigure() throws {
        let cells = [
            MatrixCell(testCase: .handshake, pairing: .ours, verdict: .pass, figure: "1 handshake"),
            MatrixCell(testCase: .keyupdate, pairing: .aioquicServer, verdict: .unsupported, figure: "no key update"),
        ]
        let table = MatrixReport.table(cells)
        #expect(table.contains("handshake ours-ours: pass — 1 handshake"))
        #expect(table.contains("keyupdate ours-aioquic: unsupported — no key update"))
        #expect(table.contains("1 pass, 0 fail, 1 unsupported"))
        let decoded = try JSONSerialization.jsonObject(with: Data(MatrixReport.json(cells).utf8)) as? [[String: Any]]
        #expect(decoded?.map { $0["case"] as? String } == ["handshake", "keyupdate"])
        #expect(decoded?.map { $0["verdict"] as? String } == ["pass", "unsupported"])
    }
}
