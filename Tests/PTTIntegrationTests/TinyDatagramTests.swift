import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Empty and one-byte UDP datagrams to the relay's port (ngtcp2_pkt_decode_version_cid must never see length 0):
/// dropped before ngtcp2, and the relay keeps serving established and new clients.
@Suite("Empty and tiny UDP datagrams are dropped", .integration)
struct TinyDatagramTests {
    private func echo(_ connection: TransportConnection, _ text: String) async throws -> Bool {
        let stream = try await connection.openStream()
        try await stream.send(Array(text.utf8))
        var iterator = stream.messages.makeAsyncIterator()
        return try await iterator.next()?.bytes == Array(text.utf8)
    }

    @Test func emptyAndOneByteDatagramsAreDroppedAndTheRelayKeepsServing() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let target = try #require(SocketAddress(host: "127.0.0.1", port: address.port))
        let established = try await Fixtures.client().connect(to: address)
        let droppedBefore = await server.droppedQUICPackets()

        var sent = 0
        for host in ["127.0.0.1", "127.0.0.3"] {
            let socket = try #require(BoundQUICClient.socket(boundTo: host))
            defer { close(socket.fd) }
            for _ in 0..<50 {
                BoundQUICClient.send(socket.fd, [], to: target)
                sent += 1
            }
            for value in 0...255 {
                BoundQUICClient.send(socket.fd, [UInt8(value)], to: target)
                sent += 1
            }
            #expect(BoundQUICClient.receive(socket.fd, milliseconds: 100) == nil, "nothing answers a tiny datagram")
        }
        var dropped: UInt64 = 0
        for _ in 0..<200 {
            dropped = await server.droppedQUICPackets() - droppedBefore
            if dropped >= UInt64(sent) { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(dropped == UInt64(sent), "every empty and one-byte datagram reached the relay and was dropped")

        #expect(try await echo(established, "still established"))
        let newcomer = try await Fixtures.client().connect(to: address)
        #expect(try await echo(newcomer, "new after the noise"))
        await newcomer.close()
        await established.close()
        await server.shutdown()
    }
}
