import Foundation
import PTTTransport
import TestSupport
import Testing

/// What each side can see of resumption: the server tells a 0-RTT wake from a cold connect (over QUIC and TCP),
/// and the client is handed every refreshed state without polling.
@Suite("Resumption seen from both sides", .serialized, .integration)
struct ResumptionVisibilityTests {
    /// A relay that answers each first message with the `resumption` its connection reports at that moment.
    static func reportingRelay(_ server: TransportServer) -> Task<Void, Never> {
        Task {
            await withDiscardingTaskGroup { group in
                for await connection in server.connections {
                    group.addTask {
                        for await stream in connection.incomingStreams {
                            guard (try? await stream.nextMessage()) != nil else { continue }
                            try? await stream.send(Array(connection.resumption.description.utf8))
                        }
                    }
                }
            }
        }
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func serverTellsAZeroRTTWakeFromAColdConnect(policy: FallbackPolicy) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Self.reportingRelay(server)
        defer { relay.cancel() }
        let address = try #require(server.quicAddress)
        let client = TCPFallbackTests.client(policy)
        let ask = EarlyMessage(Array("how did I arrive?".utf8), replaySafe: true)

        let cold = try await client.connect(to: address, earlyMessages: [ask])
        let coldAnswer = try await withTimeout { try await cold.earlyStream?.nextMessage() }
        #expect(coldAnswer.map { String(decoding: $0.bytes, as: UTF8.self) } == "not resumed")
        let saved = try await waitForResumptionState(cold)
        await cold.close()

        let warm = try await client.connect(to: address, resuming: saved, earlyMessages: [ask])
        let warmAnswer = try await withTimeout { try await warm.earlyStream?.nextMessage() }
        #expect(warmAnswer?.isEarly == false)  // the answer itself comes in 1-RTT (the server's 0.5-RTT)
        #expect(warmAnswer.map { String(decoding: $0.bytes, as: UTF8.self) } == "resumed (early data accepted)")
        #expect(warm.resumption == .resumed(earlyData: .accepted))
        await warm.close()
        await server.shutdown()
    }

    @Test func clientIsHandedEveryRefreshedStateAndTheSequenceEndsAtClose() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        let states = Task { () -> [ResumptionState] in
            var seen: [ResumptionState] = []
            for await state in connection.resumptionStates { seen.append(state) }
            return seen  // ends when the connection closes
        }
        let first = try await waitForResumptionState(connection)
        #expect(first.serialized().count > 0)
        // A state taken from the sequence resumes.
        await connection.close()
        let seen = await states.value
        #expect(!seen.isEmpty)
        let again = try await Fixtures.client().connect(to: address, resuming: seen.last)
        #expect(again.resumption != .none)
        // A subscriber after the close gets the last state, then the end.
        var afterClose = connection.resumptionStates.makeAsyncIterator()
        #expect(await afterClose.next() != nil)  // the current state first
        #expect(await afterClose.next() == nil)
        await again.close()
        await server.shutdown()
    }
}
