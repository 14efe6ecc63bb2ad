import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import Synchronization
import TestSupport
import Testing

/// Connections a stateful fuzzer left behind end: after its sequences (protocol errors, withheld ACKs, abandoned
/// paths), every connection leaves the server's tables within the idle timeout and every handler returns. The
/// server runs in this process so that both can be counted.
@Suite("Fuzzed connections end", .serialized, .enabled(if: peersEnabled), .integration)
struct FuzzedConnectionsEndTests {
    @Test func everyFuzzedConnectionLeavesAndItsHandlerReturns() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.idleTimeout = .seconds(1)
        let server = try await TransportServer.bind(configuration: configuration)
        let address = try #require(server.quicAddress)
        let handlers = Mutex((started: 0, running: 0))
        let open = Mutex([ObjectIdentifier: TransportConnection]())
        let serving = Task {
            await server.handleEachConnection { connection in
                handlers.withLock {
                    $0.started += 1
                    $0.running += 1
                }
                open.withLock { $0[ObjectIdentifier(connection)] = connection }
                await EchoRelay.serve(connection, events: { _ in })
                open.withLock { $0[ObjectIdentifier(connection)] = nil }
                handlers.withLock { $0.running -= 1 }
            }
        }
        let result = try await runProgram(
            try AioquicInteropTests.python,
            [
                StatefulFuzzTests.fuzzer, "127.0.0.1", "\(address.port)", "--ca", Fixtures.ca,
                "--relay-pid", "\(getpid())", "--sequences", "300", "--seconds", "15", "--seed", "100000",
                "--workers", "3",
            ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        // The fuzzer's totals (its last stdout line): on a loaded machine its 15 s run fits fewer sequences, so the
        // floor on handlers started follows the sequences whose handshake completed.
        let totals = result.stdout.split(separator: "\n").last.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let handshaken = ((totals?["sequences"] as? Int) ?? 0) - ((totals?["no_handshake"] as? Int) ?? 0)
        // Each left connection ends within the 1 s idle timeout and its closing period; 30 s leaves room for a
        // loaded machine (the loop ends as soon as both are 0).
        var left = (connections: -1, running: -1)
        for _ in 0..<300 {
            left = (await server.connectionCount(), handlers.withLock { $0.running })
            if left == (0, 0) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let started = handlers.withLock { $0.started }
        #expect(handshaken >= 10, "the fuzzer completed too few handshakes to mean anything: \(result.stdout)")
        #expect(started >= min(50, handshaken / 2), "handlers started: \(started); \(result.stdout)")
        #expect(left.connections == 0, "connections still in the server's tables 30 s after the fuzzer ended")
        let stuck = open.withLock { $0.values.map { "\($0.remoteAddress) \($0.status)" } }
        #expect(left.running == 0, "handlers still running 30 s after the fuzzer ended: \(stuck)")
        await server.shutdown()
        if left.running == 0 { await serving.value } else { serving.cancel() }
    }
}
