import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// A phone keeps one connection for hours and opens a stream per exchange: the relay must give back a stream's
/// credit once it closes, or the phone stalls after the initial limit's worth of streams.
@Suite("Stream credit over a long-lived connection", .integration)
struct StreamCreditTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func manyMoreStreamsThanTheLimitOpenOneAfterAnother(policy: FallbackPolicy) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.maxStreamsPerConnection = 4
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        var clientConfiguration = Fixtures.client().configuration
        clientConfiguration.fallback = policy
        let address = (policy == .tcpOnly ? server.tcpAddress! : server.quicAddress!)
        let connection = try await TransportClient(configuration: clientConfiguration).connect(to: address)
        try await withTimeout {
            for index in 0..<40 {  // ten times the limit, one stream at a time
                let stream = try await connection.openStream()
                try await stream.send(Array("exchange \(index)".utf8))
                try await stream.finish()
                var answers: [[UInt8]] = []
                for try await message in stream.messages { answers.append(message.bytes) }
                #expect(answers == [Array("exchange \(index)".utf8)], "stream \(index)")
            }
        }
        await connection.close()
        await server.shutdown()
    }
}
