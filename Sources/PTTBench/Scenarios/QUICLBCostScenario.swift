import ChildProcesses
import TransportCore

/// `bench --scenario quic-lb-cost`: the CPU a relay loop spends on its connection IDs, without and with QUIC-LB
/// (plaintext, four pass, single pass): per ID issued (`ConnectionIDIssuer.makeID`, once per SCID and
/// NEW_CONNECTION_ID) and per packet steered in user space (`owner(of:isOurs:)`, which a loop runs on every
/// packet when there are several): for a packet of a connection of the receiving loop (found in its table, as the
/// endpoint's routes find it) and of the other loop (with a key: decrypted). Thread CPU time over many repetitions
/// on a thread of its own; no sockets.
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
        result.note = "thread CPU per operation, \(repetitions) repetitions, loop 0 of two; ns"
    }

    private static func measure(repetitions: Int) throws(TransportError) -> [(String, Double)] {
        var figures: [(String, Double)] = []
        for (name, configuration) in configurations {
            let loops = try (0..<2).map { index throws(TransportError) in
                try ConnectionIDIssuer(
                    steering: ConnectionIDSteering(index: index, count: 2), configuration: configuration)
            }
            var start = CPUTime.thread()
            var ours = Set<ConnectionID>()
            for _ in 0..<repetitions { ours.insert(loops[0].makeID()) }
            figures.append(("\(name): ns CPU per ID issued", (CPUTime.thread() - start) * 1e9 / Double(repetitions)))
            // Packets the kernel put on their own loop (found in its table), and another loop's (decrypted).
            for (owner, label) in [(0, "its own loop"), (1, "the other loop")] {
                let ids = (0..<256).map { _ in loops[owner].makeID() }
                if owner == 0 { ours.formUnion(ids) }
                let packets = ids.map { [0x40] + $0.bytes + [UInt8](repeating: 0, count: 60) }
                var right = 0
                start = CPUTime.thread()
                for index in 0..<repetitions {
                    packets[index % packets.count].withUnsafeBytes {
                        if loops[0].owner(of: $0, isOurs: { ours.contains($0) }) == owner { right += 1 }
                    }
                }
                let perPacket = (CPUTime.thread() - start) * 1e9 / Double(repetitions)
                figures.append(("\(name): ns CPU to steer a packet of \(label)", right == repetitions ? perPacket : -1))
            }
        }
        return figures
    }
}
