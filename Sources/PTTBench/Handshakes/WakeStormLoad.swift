import Foundation
import PTTTransport

/// The load generator of `wake-storm`, run as a child process (`ptt-transport wake-storm-load`) so it has a core of
/// its own: it saves resumption state for N phones, says so, then wakes all N at once with a replay-safe "join" in
/// 0-RTT and prints when each got its answer.
///
/// Lines on stdout: `listening on <relay>` once the states are saved (the `ChildServer` ready line: the parent then
/// reads the relay's CPU), then, after a short pause, one `result {json}` line with `answers_ms` (one per phone
/// answered, from the storm's start), `early_accepted` and `failed`.
public enum WakeStormLoad {
    static let join = Array("join channel 7".utf8)

    /// Runs the whole load for `clients` phones against `relay` (`HOST:PORT`), trusting `ca`.
    public static func run(relay: String, ca: String, clients: Int) async throws {
        guard let address = ServerAddress(relay) else { throw BenchError("bad relay address \(relay)") }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(ca), idleTimeout: .seconds(120),
                handshakeTimeout: .seconds(30), fallback: .quicOnly))  // a QUIC storm: no TCP race
        let states = try await saveStates(client, address, count: clients)
        print("listening on \(relay)")
        fflush(nil)
        try await Task.sleep(for: .milliseconds(300))  // the parent reads the relay's CPU now

        let clock = ContinuousClock()
        let start = clock.now
        let outcomes = await withTaskGroup(of: (Double, Bool)?.self) { group in
            for state in states {
                group.addTask {
                    guard
                        let connection = try? await client.connect(
                            to: address, resuming: state, earlyMessages: [EarlyMessage(join, replaySafe: true)]),
                        let stream = connection.earlyStream
                    else { return nil }
                    var messages = stream.messages.makeAsyncIterator()
                    let answered = (try? await messages.next()) != nil
                    let elapsed = (clock.now - start).milliseconds
                    let early = connection.resumption == .resumed(earlyData: .accepted)
                    await connection.close()
                    return answered ? (elapsed, early) : nil
                }
            }
            var outcomes: [(Double, Bool)?] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let answered = outcomes.compactMap { $0 }
        let result: [String: Any] = [
            "answers_ms": answered.map { $0.0 }.sorted(), "early_accepted": answered.filter { $0.1 }.count,
            "failed": outcomes.count - answered.count,
        ]
        let data = try JSONSerialization.data(withJSONObject: result)
        print("result " + String(decoding: data, as: UTF8.self))
        fflush(nil)
    }

    /// Saved state for `count` phones: full handshakes, 32 at a time.
    private static func saveStates(
        _ client: TransportClient, _ address: ServerAddress, count: Int
    ) async throws -> [ResumptionState] {
        var states: [ResumptionState] = []
        while states.count < count {
            let batch = min(32, count - states.count)
            let saved = await withTaskGroup(of: ResumptionState?.self) { group in
                for _ in 0..<batch {
                    group.addTask {
                        guard let connection = try? await client.connect(to: address) else { return nil }
                        defer { Task { await connection.close() } }
                        for await _ in connection.resumptionStates { break }
                        try? await Task.sleep(for: .milliseconds(20))  // the NEW_TOKEN follows the ticket
                        return connection.resumptionState
                    }
                }
                var saved: [ResumptionState] = []
                for await state in group { if let state { saved.append(state) } }
                return saved
            }
            guard !saved.isEmpty else { throw BenchError("no phone could save resumption state at \(address)") }
            states += saved
        }
        return states
    }
}
