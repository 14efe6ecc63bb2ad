import PTTTransport

/// Proves the relay still serves: a legitimate client connects (over QUIC, then over TCP), has a message
/// echoed on a stream and a datagram echoed.
enum HealthCheck {
    /// nil when both transports echoed; otherwise what failed. Retries twice, so a busy machine is not a finding.
    static func run(_ relay: RelayUnderTest, certificates: Certificates) async -> String? {
        var failure: String?
        for attempt in 0..<3 {
            failure = nil
            for fallback in [FallbackPolicy.quicOnly, .tcpOnly] {
                do {
                    try await echo(relay.serverAddress, fallback: fallback, certificates: certificates)
                } catch {
                    failure = "\(fallback == .quicOnly ? "QUIC" : "TCP") echo failed: \(error)"
                    break
                }
            }
            if failure == nil { return nil }
            try? await Task.sleep(for: .milliseconds(200 * (attempt + 1)))
        }
        return failure
    }

    static func echo(_ address: ServerAddress, fallback: FallbackPolicy, certificates: Certificates) async throws {
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(certificates.authority),
            handshakeTimeout: .seconds(5))
        configuration.fallback = fallback
        let connection = try await TransportClient(configuration: configuration).connect(to: address)
        do {
            try await exchange(on: connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    /// A message on a new stream and a datagram, each echoed.
    private static func exchange(on connection: TransportConnection) async throws {
        let message = Array("health check".utf8)
        let stream = try await connection.openStream()
        try await stream.send(message)
        var messages = stream.messages.makeAsyncIterator()
        guard let echo = try await messages.next(), echo.bytes == message else {
            throw FuzzError("the message was not echoed")
        }
        let payload = Array("health datagram".utf8)
        let echoed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await datagram in connection.datagrams where datagram.payload == payload { return true }
                return false
            }
            group.addTask {
                for _ in 0..<20 {  // datagrams may be lost: send until one comes back (at most 2 s)
                    try connection.sendDatagram(payload)
                    try await Task.sleep(for: .milliseconds(100))
                }
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        guard echoed else { throw FuzzError("no datagram was echoed") }
    }
}
