import Foundation
import PTTTransport
import TestSupport
import Testing

/// Saved state on disk: written atomically and privately, read back, and every way it can be wrong is a typed
/// error (or, for a first start, nil).
@Suite("Resumption state files", .integration)
struct ResumptionFileTests {
    @Test func savedStateRoundTripsPrivatelyAndBadFilesAreClearErrors() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        let state = try await waitForResumptionState(connection)
        await connection.close()

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.state").path

        #expect(try ResumptionState.load(from: path) == nil)  // first start: nothing saved yet
        try state.save(to: path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "the state holds a session secret")
        #expect(try ResumptionState.load(from: path) == state)
        #expect(try ResumptionState(serialized: Data(state.serialized())) == state)

        try Data("not a state".utf8).write(to: URL(fileURLWithPath: path))
        #expect { try ResumptionState.load(from: path) } throws: {
            ($0 as? TransportError)?.code == .resumptionStateUnusable
        }
        #expect { try state.save(to: directory.appendingPathComponent("missing/relay.state").path) } throws: {
            ($0 as? TransportError)?.code == .invalidConfiguration
        }
        let resumed = try await Fixtures.client().connect(to: address, resuming: state)
        #expect(resumed.resumption != .none)
        await resumed.close()
        await server.shutdown()
    }

    @Test func waitUntilReadyReturnsOnceTheHandshakeCompletedAndThrowsAfterAClose() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)  // connections before the handshake
        let server = try await TransportServer.bind(configuration: configuration)
        let address = try #require(server.quicAddress)
        let client = try await Fixtures.client().connect(to: address)
        try await client.waitUntilReady()  // a connected client is ready at once
        var accepted = server.connections.makeAsyncIterator()
        let serverSide = try #require(await accepted.next())
        try await withTimeout { try await serverSide.waitUntilReady() }
        #expect(serverSide.status == .ready)
        await client.close(code: 7)
        _ = try await serverSide.closed()
        await #expect(throws: TransportError.self) { try await serverSide.waitUntilReady() }
        await server.shutdown()
    }
}
