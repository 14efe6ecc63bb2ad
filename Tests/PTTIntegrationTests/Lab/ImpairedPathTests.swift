import Glibc
import TestSupport
import Testing
import TransportIO

@testable import NetworkEmulation

/// The impairments on a real emulated path: rewritten and corrupted packets still pass the kernel's checksum
/// checks and reach the socket; the NAT's new port is what the server sees, and its old mapping is gone.
@Suite(
    "Impaired emulated path (namespaces, TUN, kernel checksums)", .serialized,
    .enabled(if: emulationAvailability.0, Comment(rawValue: "emulation unavailable: \(emulationAvailability.1)")),
    .integration)
struct ImpairedPathTests {
    typealias Sockets = NetworkEmulatorTests

    @Test func corruptedDatagramsStillReachTheSocketWithOneByteChanged() throws {
        try Sockets.withSockets(rtt: .milliseconds(2)) { network, server, client in
            network.impair(Impairments(corruptionRate: 1))
            let sent = (0..<64).map { UInt8($0) }
            for _ in 0..<20 {
                try Sockets.send(sent, from: client.fd, to: network.serverAddress, port: server.port)
                let (received, _) = try #require(Sockets.receive(server.fd, timeoutMilliseconds: 1_000))
                let changed = (0..<sent.count).filter { sent[$0] != received[$0] }
                #expect(received.count == sent.count && changed.count == 1 && changed[0] < 50)
            }
            #expect(network.counters.corrupted == 20)
        }
    }

    @Test func natRebindingMovesTheSourcePortAndDropsRepliesToTheOldOne() throws {
        try Sockets.withSockets(rtt: .milliseconds(2)) { network, server, client in
            network.impair(
                Impairments(nat: NATRebinding(firstRebind: 300_000_000, interval: nil, rewriteAddress: true)))
            try Sockets.send([1], from: client.fd, to: network.serverAddress, port: server.port)
            let (_, before) = try #require(Sockets.receive(server.fd, timeoutMilliseconds: 1_000))
            let clientPort = Sockets.localPort(client.fd)  // bound by the first send
            #expect(UInt16(bigEndian: before.sin_port) == clientPort, "identity before the first rebind")
            Sockets.sleepMilliseconds(400)
            try Sockets.send([2], from: client.fd, to: network.serverAddress, port: server.port)
            let (_, after) = try #require(Sockets.receive(server.fd, timeoutMilliseconds: 1_000))
            #expect(UInt16(bigEndian: after.sin_port) != clientPort, "a new public port")
            #expect(after.sin_addr.s_addr != before.sin_addr.s_addr, "the address moved within the /24")

            for (peer, delivered) in [(after, true), (before, false)] {
                var reply = peer
                let sent = withUnsafePointer(to: &reply) {
                    sendto(
                        server.fd, [9], 1, 0, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                        socklen_t(MemoryLayout<sockaddr_in>.size))
                }
                #expect(sent == 1)
                let echo = Sockets.receive(client.fd, timeoutMilliseconds: 300)
                #expect((echo?.0 == [9]) == delivered, delivered ? "the new mapping leads back" : "the old one is gone")
            }
            #expect(network.counters.rebinds == 1 && network.counters.natDropped == 1)
        }
    }
}
