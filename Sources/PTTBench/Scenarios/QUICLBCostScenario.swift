import ChildProcesses
import TransportCore

/// `bench --scenario quic-lb-cost`: the CPU a relay loop spends on its connection IDs, without and with QUIC-LB
/// (plaintext, four pass, single pass): per ID issued (`ConnectionIDIssuer.makeID`, once per SCID and
/// NEW_CONNECTION_ID) and per packet steered in user space (`owner(of:)`, which every loop runs on every packet
/// when the kernel cannot steer: with a key it decrypts the destination ID). Thread CPU time over many
/// repetitions on a thread of its own; no sockets.
enum QUICLBCostScenario {
    static let configurations: [(name: String, configuration: QUICLBConfiguration?)] = [
        ("random", nil),
        ("plaintext", try? QUICLBConfiguration(configRotation: 1, serverID: [1, 2, 3], nonceLength: 6)),
        ("four-pass", try? QUICLBConfiguration(configRotation: 1, serverID: [1, 2, 3], nonceLength: 6, key: key)),
        ("single-pass", try? QUICLBConfiguration(configRotation: 1, serverID: [1, 2, 3], nonceLength: 13, key: key)),
    ]
    static let key = [UInt8](repeating: 0x5c, count: 16)

    static func run(_ result: inout ScenarioResult, options: BenchOptions) async throws {
        let repetitions = max(options.iterations, 1) * 2_000
        result.iterations = repetitions
        let figures = try await onThread { () -> Result<[(String, Double)], TransportError> in
            Result { () throws(TransportError) in try measure(repetitions: repetitions) }
        }.get()
        result.figures.append(contentsOf: figures)
        result.note = "thread CPU per operation, \(repetitions) repetitions, one loop of two; ns"
    }

    private static func measure(repetitions: Int) throws(TransportError) -> [(String, Double)] {
        var figures: [(String, Double)] = []
        for (name, configuration) in configurations {
            let issuer = try ConnectionIDIssuer(
                steering: ConnectionIDSteering(index: 1, count: 2), configuration: configuration)
            var start = CPUTime.thread()
            var packets: [[UInt8]] = []
            for index in 0..<repetitions {
                let id = issuer.makeID()
                if index < 256 { packets.append([0x40] + id.bytes + [UInt8](repeating: 0, count: 60)) }
            }
            figures.append(("\(name): ns CPU per ID issued", (CPUTime.thread() - start) * 1e9 / Double(repetitions)))
            var owned = 0
            start = CPUTime.thread()
            for index in 0..<repetitions {
                packets[index % packets.count].withUnsafeBytes { if issuer.owner(of: $0) == 1 { owned += 1 } }
            }
            let perPacket = (CPUTime.thread() - start) * 1e9 / Double(repetitions)
            figures.append(("\(name): ns CPU per packet steered in user space", owned == repetitions ? perPacket : -1))
        }
        return figures
    }
}
