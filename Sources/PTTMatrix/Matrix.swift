import Foundation
import NetworkEmulation
import TransportIO

/// Runs the matrix: every selected case with every selected pairing, each QUIC cell on a fresh emulated path, each
/// QMux cell on loopback.
package enum Matrix {
    /// Why emulation cannot run here, or nil.
    package static func unavailableReason() -> String? {
        let (available, reason) = EmulatedNetwork.isAvailable()
        return available ? nil : reason
    }

    /// The cells, in case order then pairing order.
    package static func run(_ options: MatrixOptions) async -> [MatrixCell] {
        let quicCases = options.cases.contains { !$0.isQMux }
        let aioquic: Result<AioquicPeers, MatrixError>? =
            quicCases && options.pairings.contains(where: \.isAioquic)
            ? await AioquicPeers.locate(packageRoot: options.packageRoot) : nil
        let moq: Result<MoqPeers, MatrixError>? =
            options.cases.contains(where: \.isQMux) && options.pairings.contains(where: \.isMoq)
            ? await MoqPeers.locate(packageRoot: options.packageRoot) : nil
        var cells: [MatrixCell] = []
        for testCase in options.cases {
            for pairing in options.pairings {
                options.progress("\(testCase.rawValue) (\(pairing.rawValue))")
                let started = ContinuousClock.now
                let outcome =
                    testCase.isQMux
                    ? await QMuxCases.run(testCase, pairing, options, moq)
                    : await cell(testCase, pairing, options, aioquic)
                var cell = MatrixCell(
                    testCase: testCase, pairing: pairing, verdict: outcome.verdict, figure: outcome.figure)
                cell.seconds = (ContinuousClock.now - started).matrixMilliseconds / 1_000
                options.progress("  \(cell.verdict.rawValue): \(cell.figure)")
                cells.append(cell)
            }
        }
        return cells
    }

    private static func cell(
        _ testCase: MatrixCase, _ pairing: Pairing, _ options: MatrixOptions,
        _ aioquic: Result<AioquicPeers, MatrixError>?
    ) async -> Outcome {
        if pairing.isMoq {
            return .unsupported(
                "moq-dev's pairings run the QMux cases: its binding speaks MoQ on streams it opens itself, so it "
                    + "cannot send the control messages and audio frames the QUIC cases echo")
        }
        if let reason = unavailableReason() { return .unsupported("emulation unavailable: \(reason)") }
        var peers: AioquicPeers?
        if pairing.isAioquic {
            switch aioquic {
            case .success(let found): peers = found
            case .failure(let error): return .unsupported("\(error)")
            case nil: return .unsupported("aioquic was not looked for")
            }
        }
        let path: MatrixPath
        do {
            path = try MatrixPath(
                oneWayMilliseconds: testCase == .longrtt ? 750 : options.oneWayMilliseconds,
                loss: lossRate(testCase), seed: options.seed, ipv6: testCase == .ipv6)
        } catch {
            return .fail("cannot set up the emulated path: \(error)")
        }
        defer { path.shutdown() }
        let run = CaseRun(path: path, pairing: pairing, options: options, aioquic: peers)
        do {
            return try await body(testCase, run)
        } catch {
            return .fail("\(error)")
        }
    }

    /// The path's own (seeded) loss rate for a case; the burst limit comes with the case's impairments.
    private static func lossRate(_ testCase: MatrixCase) -> Double {
        switch testCase {
        case .handshakeloss: return 0.3
        case .transferloss: return 0.02
        default: return 0
        }
    }

    private static func body(_ testCase: MatrixCase, _ run: CaseRun) async throws -> Outcome {
        switch testCase {
        case .handshake: return try await SetupCases.handshake(run)
        case .retry: return try await SetupCases.retry(run)
        case .resumption: return try await SetupCases.resumption(run)
        case .zerortt: return try await SetupCases.zerortt(run)
        case .chacha20: return try await SetupCases.chacha20(run)
        case .amplificationlimit: return try await SetupCases.amplificationlimit(run)
        case .handshakeloss: return try await SetupCases.lossyHandshakes(run, corruption: false)
        case .handshakecorruption: return try await SetupCases.lossyHandshakes(run, corruption: true)
        case .transferloss: return try await CallCases.lossyCall(run, corruption: false)
        case .transfercorruption: return try await CallCases.lossyCall(run, corruption: true)
        case .blackhole: return try await CallCases.blackhole(run)
        case .ecn: return try await SetupCases.ecn(run)
        case .ipv6: return try await SetupCases.ipv6(run)
        case .rebindPort: return try await CallCases.rebind(run, address: false)
        case .rebindAddr: return try await CallCases.rebind(run, address: true)
        case .udpBlocked: return try await SetupCases.udpBlocked(run)
        case .transfer: return try await CallCases.transfer(run)
        case .longrtt: return try await SetupCases.longrtt(run)
        case .connectionmigration: return try await CallCases.connectionMigration(run)
        case .keyupdate: return try await CallCases.keyUpdate(run)
        case .v2: return try await VersionCases.v2(run)
        case .qmuxHandshake, .qmuxStream, .qmuxDatagram: return .fail("QMux cases run on loopback, not here")
        }
    }
}
