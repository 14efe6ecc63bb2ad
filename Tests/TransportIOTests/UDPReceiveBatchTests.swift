import Glibc
import Testing
import TransportCore

@testable import TransportIO

/// The receive batch on real sockets: a burst larger than one `recvmmsg` call arrives whole and in order, each
/// datagram with its sender, the local address it was sent to, its ECN codepoint and its exact bytes (a 60 KB one
/// too); an empty socket reads nothing; an ICMP error is a typed error and the socket reads on afterwards.
@Suite("UDP receive batch (recvmmsg)")
struct UDPReceiveBatchTests {
    static let loopback = SocketAddress(host: "127.0.0.1", port: 0)!

    @Test func aBurstArrivesWholeInOrderWithAddressesAndECN() throws {
        let receiver = try UDPSocket(bindingTo: Self.loopback)
        let senders = try (0..<2).map { _ in try UDPSocket(bindingTo: Self.loopback) }
        let batch = try UDPReceiveBatch(socket: receiver, slots: 8)
        // 50 datagrams (more than six batches) from two senders, sizes 1...60,000 bytes, ECN 0...3.
        let sizes = (0..<50).map { $0 == 17 ? 60_000 : 1 + $0 * 29 }
        for (index, size) in sizes.enumerated() {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index) }
            let failure = bytes.withUnsafeBytes {
                senders[index % 2].send($0, to: receiver.localAddress, from: nil, ecn: UInt32(index % 4))
            }
            #expect(failure == nil)
        }
        var received: [(bytes: [UInt8], remote: SocketAddress, local: SocketAddress, ecn: UInt32)] = []
        var calls = 0
        while received.count < sizes.count, calls < 1_000 {
            calls += 1
            let count = try batch.receive(upTo: 64) { packet, datagram in
                #expect(datagram.length == packet.count)
                received.append(([UInt8](packet), datagram.remote, datagram.local, datagram.ecn))
            }
            if count == 0 { usleep(1_000) }
        }
        #expect(received.count == sizes.count)
        for (index, entry) in received.enumerated() {
            let expected = (0..<sizes[index]).map { UInt8(truncatingIfNeeded: $0 &+ index) }
            #expect(entry.bytes == expected, "datagram \(index): its bytes, in order")
            #expect(entry.remote == senders[index % 2].localAddress)
            #expect(entry.local == receiver.localAddress, "the local address keeps the socket's port")
            #expect(entry.ecn == UInt32(index % 4))
        }
        #expect(try batch.receive(upTo: 64) { _, _ in Issue.record("nothing was left to read") } == 0)
    }

    @Test func anICMPErrorIsATypedErrorAndReadingGoesOn() throws {
        // A connected socket whose peer port is closed: the kernel reports the port-unreachable on the next read.
        let closed = try UDPSocket(bindingTo: Self.loopback)
        let peer = closed.localAddress
        closed.close()
        let socket = try UDPSocket(bindingTo: Self.loopback, connectingTo: peer)
        let batch = try UDPReceiveBatch(socket: socket)
        _ = [UInt8](repeating: 1, count: 10).withUnsafeBytes { socket.send($0, to: nil, from: nil, ecn: 0) }
        usleep(20_000)
        do {
            _ = try batch.receive(upTo: 8) { _, _ in Issue.record("no datagram was sent to this socket") }
            Issue.record("the port-unreachable error was not reported")
        } catch {
            #expect(error.code == .unreachable, "\(error)")
        }
        #expect(try batch.receive(upTo: 8) { _, _ in } == 0, "the error is reported once, then the socket is empty")
    }

    @Test func aBatchOutOfRangeIsRefused() {
        #expect(throws: TransportError.self) {
            _ = try UDPReceiveBatch(socket: UDPSocket(bindingTo: Self.loopback), slots: 0)
        }
        #expect(throws: TransportError.self) {
            _ = try UDPReceiveBatch(socket: UDPSocket(bindingTo: Self.loopback), slots: 257)
        }
    }
}
