import BenchSupport
import Testing

@testable import TransportCore

/// The in-memory pair the benchmark measures the handshake floor with: it must really complete full and resumed
/// 0-RTT handshakes, and meter each side's work apart.
@Suite("In-memory exchange (handshake floor)")
struct InMemoryExchangeTests {
    @Test func fullThenResumedZeroRTTHandshakesCompleteWithEachSideMetered() throws {
        let endpoint = try QUICServerEndpoint(
            parameters: QUICParameters(), tls: ZeroRTTTests.serverTLS(), secrets: .random())
        let exchange = InMemoryExchange(server: endpoint)
        var calls: [InMemoryExchange.Side: Int] = [:]
        exchange.meter = { side, work in
            calls[side, default: 0] += 1
            work()
        }
        var earlyAtServer: [Bool] = []
        exchange.onServerEvent = { connection, event in
            if case .streamData(let id, let bytes, let fin, let isEarly) = event, !bytes.isEmpty {
                earlyAtServer.append(isEarly)
                try? connection.write(stream: id, bytes, fin: fin)
            }
        }
        let tls = try TLSClientContext(trust: .certificates(TestCertificates.pem(TestCertificates.ca)))

        let first = try QUICConnection(
            clientWith: QUICParameters(), tls: tls, serverName: "localhost", local: exchange.clientAddress(0),
            remote: exchange.serverAddress, now: exchange.now)
        var ticket: [UInt8]?
        var token: [UInt8] = []
        #expect(
            exchange.run(
                client: first, at: exchange.clientAddress(0),
                onClientEvent: { event in
                    if case .sessionTicket(let bytes) = event { ticket = bytes }
                    if case .newToken(let bytes) = event { token = bytes }
                }, until: { ticket != nil && !token.isEmpty }))
        #expect(calls[.client, default: 0] > 0 && calls[.server, default: 0] > 0)
        #expect(endpoint.connectionCount == 0, "the server's connection is forgotten after the run")

        let resumption = ClientResumption(
            ticket: try #require(ticket), transportParameters: first.encodedPeerTransportParameters, token: token,
            smoothedRTT: 0)
        let resumed = try QUICConnection(
            clientWith: QUICParameters(), tls: tls, serverName: "localhost", local: exchange.clientAddress(1),
            remote: exchange.serverAddress, now: exchange.now, resumption: resumption)
        let stream = try #require(try resumed.openBidirectionalStream())
        try resumed.write(stream: stream, Array("join 7".utf8), fin: true)
        var echoed: [UInt8] = []
        #expect(
            exchange.run(
                client: resumed, at: exchange.clientAddress(1),
                onClientEvent: { event in
                    if case .streamData(let id, let bytes, _, _) = event, id == stream { echoed += bytes }
                }, until: { echoed.count == 6 }))
        #expect(resumed.earlyDataAccepted == true)
        #expect(earlyAtServer == [true], "the join arrived in 0-RTT")
    }

    /// The live floor holds every connection, as a relay holds woken phones: a kept server connection stays in the
    /// endpoint and still serves its client after the run.
    @Test func aKeptServerConnectionStaysRoutedAndServesItsClient() throws {
        let endpoint = try QUICServerEndpoint(
            parameters: QUICParameters(), tls: ZeroRTTTests.serverTLS(), secrets: .random())
        let exchange = InMemoryExchange(server: endpoint)
        exchange.onServerEvent = { connection, event in connection.echo(event) }
        let tls = try TLSClientContext(trust: .certificates(TestCertificates.pem(TestCertificates.ca)))
        var clients: [QUICConnection] = []
        for index in 0..<3 {
            let client = try QUICConnection(
                clientWith: QUICParameters(), tls: tls, serverName: "localhost",
                local: exchange.clientAddress(index), remote: exchange.serverAddress, now: exchange.now)
            var completed = false
            #expect(
                exchange.run(
                    client: client, at: exchange.clientAddress(index), keepServerConnection: true,
                    onClientEvent: { if case .handshakeCompleted = $0 { completed = true } }, until: { completed }))
            clients.append(client)
        }
        #expect(endpoint.connectionCount == 3, "every kept connection is still in the endpoint")

        let first = clients[0]
        let stream = try #require(try first.openBidirectionalStream())
        try first.write(stream: stream, Array("still here".utf8), fin: false)
        var echoed: [UInt8] = []
        #expect(
            exchange.run(
                client: first, at: exchange.clientAddress(0), keepServerConnection: true,
                onClientEvent: { event in
                    if case .streamData(let id, let bytes, _, _) = event, id == stream { echoed += bytes }
                }, until: { echoed.count == 10 }))
        #expect(echoed == Array("still here".utf8), "the kept connection answered after its handshake's run")
        #expect(endpoint.connectionCount == 3)
    }
}
