import Foundation
import Testing

@testable import PTTBench

extension BenchOptions {
    /// The options a test runs the benchmark with: this repository's test PKI and package root, whatever the
    /// working directory.
    static func inRepository() -> BenchOptions {
        var options = BenchOptions()
        let root = #filePath.components(separatedBy: "/Tests/")[0]
        options.certificate = "\(root)/certs/server.pem"
        options.privateKey = "\(root)/certs/server.key"
        options.certificateAuthority = "\(root)/certs/ca.pem"
        options.packageRoot = root
        return options
    }
}

/// Runs `scenario`, which needs an emulated path: on loopback it must only say so (`--rtt` in its note, no figure);
/// then at `rtt` ms, its figures by name, or nil where this machine has no emulated path (not root, no TUN).
func emulatedScenarioFigures(_ scenario: String, rtt: Double) async throws -> [String: Double]? {
    var options = BenchOptions.inRepository()
    options.scenarios = [scenario]
    let loopback = try await Bench.run(options)
    let plain = try #require(loopback.results.first { $0.scenario == scenario })
    #expect(plain.figures.isEmpty && plain.note?.contains("--rtt") == true, "\(plain.note ?? "no note")")

    options.rttMilliseconds = rtt
    let report = try await Bench.run(options)
    guard report.rttMilliseconds != nil else { return nil }
    let row = try #require(report.results.first { $0.scenario == scenario })
    return Dictionary(uniqueKeysWithValues: row.figures.map { ($0.name, $0.value) })
}
