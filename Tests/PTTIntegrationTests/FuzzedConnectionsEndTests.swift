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
        var left = (connections: -1, running: -1)
        for _ in 0..<100 {
            left = (await server.connectionCount(), handlers.withLock { $0.running })
            if left == (0, 0) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(handlers.withLock { $0.started } >= 50)
        #expect(left.connections == 0, "connections still in the server's tables 10 s after the fuzzer ended")
        let stuck = open.withLock { $0.values.map { "\($0.remoteAddress) \($0.status)" } }
        #expect(left.running == 0, "handlers still running 10 s after the fuzzer ended: \(stuck)")
        await server.shutdown()
        if left.running == 0 { await serving.value } else { serving.cancel() }
    }
}
