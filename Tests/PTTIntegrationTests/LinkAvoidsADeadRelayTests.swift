import Foundation
import PTTTransport
import TestSupport
import Testing

/// A link whose relay died or hung under it tries the other addresses of the name first: a hung host answers
/// nothing (no ICMP, no reset), and trying it first would cost the whole attempt delay before the next address.
@Suite(.integration) struct LinkAvoidsADeadRelayTests {
    @Test func aLinkWhoseRelayHungReconnectsToAnotherAddressOfTheNameFirst() async throws {
        let key = try ServerIdentityTests.keyFile()
        defer { key.cleanup() }
        let (servers, port) = try await ServerIdentityTests.fleet(["127.0.0.2", "127.0.0.3"], keyFile: key.path)
        defer { Task { await servers[1].shutdown() } }
        // The attempt delay (30 s) and the handshake timeout (40 s) are longer than this test's deadline: a link that
        // tried the hung host first would still be waiting on it.
        var configuration = ServerIdentityTests.client(
            .quicOnly, name: "localhost", port: port, addresses: ["127.0.0.2", "127.0.0.3"]
        ).configuration
        configuration.handshakeTimeout = .seconds(40)
        let client = TransportClient(configuration: configuration)
        let link = TransportLink(client: client, to: ServerAddress(host: "localhost", port: port))
        defer { link.stop() }
        let first = try await withTimeout { try await link.nextReady() }
        #expect(first.remoteAddress.hasPrefix("127.0.0.2"))

        // The relay at 127.0.0.2 ends its connection and its host hangs: a silent socket takes the port.
        await servers[0].shutdown()
        let hung = try #require(TCPBadInputTests.holdUDP(port, host: "127.0.0.2"), "port \(port) taken on UDP")
        defer { close(hung) }
        let moved = await eventually(within: .seconds(20)) {
            link.connection?.remoteAddress.hasPrefix("127.0.0.3") == true && link.status == .ready
        }
        #expect(moved, "the link reconnected to the other relay (now: \(link.connection?.remoteAddress ?? "none"))")
    }
}
