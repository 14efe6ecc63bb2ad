import Foundation
import TestSupport
import Testing

@testable import PTTFuzz

/// A short fixed budget of every target against an in-process relay: no crash, every target fed, the relay
/// still serving. (No timing is asserted.)
@Suite(.integration) struct ShortRunTests {
    static let certs = "\(Fixtures.root)/certs"

    @Test func twoThousandInputsFindNothing() async throws {
        var options = FuzzOptions()
        options.iterations = 2000
        options.seed = 1
        options.certificates = Certificates(directory: Self.certs)
        let report = try await Fuzz.run(options)
        #expect(report.totalCrashes == 0, "\(report.table())")
        #expect(report.totalHealthFailures == 0, "\(report.table())")
        let names = Set(report.targets.map(\.name))
        for expected in [
            "qmux-records", "qmux-frames", "qmux-transport-parameters", "qmux-connection-server",
            "qmux-connection-client", "varint", "message-framing", "socket-address", "server-address",
            "resumption-blob", "resumption-state", "client-hello-key-name", "relay-udp", "relay-tcp",
            "relay-qmux-tls", "quic-server-endpoint", "talk-group-message", "audio-frame-header", "wake-ticket",
            "trunk-message", "request-envelope", "resp-replies", "redis-client",
        ] {
            #expect(names.contains(expected), "no \(expected) row")
        }
        for target in report.targets {
            #expect(target.inputs > 0, "\(target.name) got no inputs")
            #expect(target.inputs == target.accepted + target.rejected + target.crashes)
        }
        #expect(
            report.targets.first { $0.name == "client-hello-key-name" }.map { $0.accepted > 0 } == true,
            "the captured resumed ClientHello carries a ticket key name")
        #expect(report.targets.filter { $0.name.hasPrefix("relay-") }.allSatisfy { $0.healthPassed > 0 })
        for name in ["talk-group-message", "audio-frame-header", "wake-ticket", "trunk-message"] {
            let target = report.targets.first { $0.name == name }
            #expect(target.map { $0.accepted > 0 && $0.rejected > 0 } == true, "\(name): seeds and garbage both fed")
        }
        #expect(report.isClean)
        #expect(report.json().contains("\"total_crashes\":0"))
    }

    /// The `ptt-transport` that `swift test` built next to the test bundle (nil when it is not there).
    static let executable: String? = {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ptt-transport").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    @Test(.enabled(if: executable != nil, "needs the ptt-transport executable built next to the tests"))
    func theCLIAndAChildRelayToo() async throws {
        var options = FuzzOptions()
        options.iterations = 2000
        options.seed = 2
        options.certificates = Certificates(directory: Self.certs)
        options.executable = Self.executable
        let report = try await Fuzz.run(options)
        #expect(report.isClean, "\(report.table())")
        let cli = report.targets.first { $0.name == "cli" }
        #expect(cli.map { $0.inputs > 0 && $0.crashes == 0 } == true, "\(report.table())")
        #expect(report.notes.contains { $0.contains("child `ptt-transport serve`") })
    }

    @Test func theSameSeedFeedsTheSameInputs() async throws {
        // Parser targets only (the live ones depend on the relay's answers and timing).
        var first = FuzzRandom(seed: 11)
        var second = FuzzRandom(seed: 11)
        let target = QMuxTargets.all()[0]
        let a = target.run(count: 300, random: &first)
        let b = target.run(count: 300, random: &second)
        #expect(a.accepted == b.accepted && a.rejected == b.rejected)
    }
}
