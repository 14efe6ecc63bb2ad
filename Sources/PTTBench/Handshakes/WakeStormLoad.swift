import ChildProcesses
import Foundation
import PTTTransport
import TransportIO

/// The load generator of `wake-storm`, run as a child process (`ptt-lab wake-storm-load`) so it has a core of
/// its own: it saves resumption state for N phones, says so, then wakes all N at once with a replay-safe "join" in
/// 0-RTT and prints when each got its answer.
///
/// Lines on stdout: `listening on <relay>` once the states are saved (the `ChildServer` ready line: the parent then
/// reads the relay's CPU), then, after a short pause, one `result {json}` line with `answers_ms` (one per phone
/// answered, from the storm's start), `early_accepted`, `failed` and `cpu_s` (this process's CPU during the storm),
/// and `closed N` once every phone hung up.
///
/// A woken phone stays connected: it joined to hear the talk burst. So every phone keeps its connection until the
/// last one was answered and the result is out, then all hang up: their closes are not part of the storm.
///
/// The phones are spread round-robin over `loops` client event loops (one `TransportClient` each), so the load
/// generator is not one thread serialising every phone's handshake while the relay has cores to spare.
public enum WakeStormLoad {
    static let join = Array("join channel 7".utf8)

    /// Runs the whole load for `clients` phones against `relay` (`HOST:PORT`), trusting `ca`, on `loops` client
    /// event loops.
    public static func run(relay: String, ca: String, clients: Int, loops loopCount: Int) async throws {
        guard let address = ServerAddress(relay) else { throw BenchError("bad relay address \(relay)") }
        let configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(ca), idleTimeout: .seconds(120),
            handshakeTimeout: .seconds(30), fallback: .quicOnly)  // a QUIC storm: no TCP race
        let loops = try (0..<max(1, loopCount)).map { try EventLoop(name: "storm-load-\($0)") }
        defer { for loop in loops { loop.shutdown() } }
        let perLoop = loops.map { TransportClient(configuration: configuration, loop: $0) }
        let states = try await saveStates(perLoop[0], address, count: clients)
        print("listening on \(relay)")
        fflush(nil)
        try await Task.sleep(for: .milliseconds(300))  // the parent reads the relay's CPU now

        let clock = ContinuousClock()
        let start = clock.now
        let cpuBefore = CPUTime.process()
        let outcomes = await withTaskGroup(of: Phone.self) { group in
            for (index, state) in states.enumerated() {
                let client = perLoop[index % perLoop.count]
                group.addTask {
                    guard
                        let connection = try? await client.connect(
                            to: address, resuming: state, earlyMessages: [EarlyMessage(join, replaySafe: true)])
                    else { return Phone(answer: nil, connection: nil) }
                    guard let stream = connection.earlyStream else { return Phone(answer: nil, connection: connection) }
                    var messages = stream.messages.makeAsyncIterator()
                    let answered = (try? await messages.next()) != nil
                    let elapsed = (clock.now - start).milliseconds
                    let early = connection.resumption == .resumed(earlyData: .accepted)
                    return Phone(answer: answered ? (elapsed, early) : nil, connection: connection)
                }
            }
            var outcomes: [Phone] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let answered = outcomes.compactMap(\.answer)
        let result: [String: Any] = [
            "answers_ms": answered.map(\.milliseconds).sorted(), "early_accepted": answered.filter(\.early).count,
            "failed": outcomes.count - answered.count, "cpu_s": CPUTime.process() - cpuBefore,
        ]
        let data = try JSONSerialization.data(withJSONObject: result)
        print("result " + String(decoding: data, as: UTF8.self))
        fflush(nil)
        await withDiscardingTaskGroup { group in
            for connection in outcomes.compactMap(\.connection) { group.addTask { await connection.close() } }
        }
        print("closed \(outcomes.count)")
        fflush(nil)
    }

    /// One phone of the storm: when it was answered (ms from the start, and whether in 0-RTT), and its connection,
    /// kept open until the storm's result is out.
    private struct Phone: Sendable {
        var answer: (milliseconds: Double, early: Bool)?
        var connection: TransportConnection?
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
