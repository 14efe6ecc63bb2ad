import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Valid Initials from many source addresses (every 127.x.y.z is local on Linux): once the relay holds
/// `retryAboveConnections`, each new Initial without a token gets a Retry and allocates nothing, while clients
/// that follow the Retry still connect and established connections keep working.
@Suite("A flood of Initials from many addresses is held at the Retry threshold", .serialized, .integration)
struct InitialFloodTests {
    /// Long header, type Retry (RFC 9000 §17.2.5).
    private func isRetry(_ datagram: [UInt8]) -> Bool { datagram.first.map { $0 & 0xf0 == 0xf0 } ?? false }

    private func echo(_ connection: TransportConnection, _ text: String) async throws -> Bool {
        let stream = try await connection.openStream()
        try await stream.send(Array(text.utf8))
        var iterator = stream.messages.makeAsyncIterator()
        return try await iterator.next()?.bytes == Array(text.utf8)
    }

    private func waitForConnectionCount(_ server: TransportServer, _ expected: Int) async throws -> Int {
        for _ in 0..<500 {
            if await server.connectionCount() == expected { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return await server.connectionCount()
    }

    @Test func floodAboveTheThresholdGetsRetriesAndAllocatesNothing() async throws {
        let threshold = 5
        var configuration = Fixtures.serverConfiguration()
        configuration.retryAboveConnections = threshold
        configuration.handshakeTimeout = .seconds(60)  // the flood's half-open connections stay for the whole test
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let address = try #require(server.quicAddress)
        let target = try #require(SocketAddress(host: "127.0.0.1", port: address.port))

        let established = try await Fixtures.client().connect(to: address)
        #expect(try await echo(established, "before the flood"))

        // 127.0.0.2 ... 127.0.0.200: one valid Initial each, never followed up.
        var sockets: [(host: String, fd: Int32)] = []
        defer { for socket in sockets { close(socket.fd) } }
        for last in 2...200 {
            let host = "127.0.0.\(last)"
            let socket = try #require(BoundQUICClient.socket(boundTo: host), "cannot bind \(host)")
            sockets.append((host, socket.fd))
            BoundQUICClient.send(socket.fd, try BoundQUICClient.initialDatagram(to: target), to: target)
            if last == threshold {  // under the threshold the relay accepts: wait until it holds exactly that many
                #expect(try await waitForConnectionCount(server, threshold) == threshold)
            }
        }

        var retries = 0
        var others: [String] = []
        let deadline = Date().addingTimeInterval(10)  // generous for a loaded machine; replies are usually there
        for (index, socket) in sockets.enumerated() {
            var sawRetry = false
            func wait() -> Int32 { index < threshold - 1 ? 0 : Int32(max(0, deadline.timeIntervalSinceNow) * 1000) }
            while let reply = BoundQUICClient.receive(socket.fd, milliseconds: wait()) {
                if isRetry(reply) { sawRetry = true } else if index >= threshold - 1 { others.append(socket.host) }
                if sawRetry { break }
            }
            if index >= threshold - 1, sawRetry { retries += 1 }
        }
        #expect(retries == 200 - threshold, "every Initial over the threshold is answered with a Retry")
        #expect(others.isEmpty, "no handshake packets to sources over the threshold: \(others)")
        #expect(await server.connectionCount() == threshold, "the Retries allocated no connection")

        // A legitimate client follows the Retry and gets in; the established connection is unaffected.
        let newcomer = try await Fixtures.client().connect(to: address)
        #expect(try await echo(newcomer, "after a retry"))
        #expect(try await echo(established, "during the flood"))
        #expect(await server.connectionCount() == threshold + 1)
        await newcomer.close()
        await established.close()
        await server.shutdown()
    }
}
