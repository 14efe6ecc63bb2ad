import Glibc
import Testing
import TransportCore

@testable import TransportIO

/// The steering program in the kernel: sockets of an SO_REUSEPORT group on loopback, QUIC-shaped datagrams from a
/// client socket, and where each one arrives.
@Suite("SO_REUSEPORT group steering (real sockets)")
struct ReuseportGroupTests {
    /// A group of `count` sockets on 127.0.0.1 with the program attached (the probe verified it).
    static func group(_ count: Int) throws -> [UDPSocket] {
        let sockets = try ReuseportGroup.bind(SocketAddress(parsing: "127.0.0.1:0")!, count: count)
        #expect(ReuseportGroup.steer(sockets) == .kernelProgram, "this kernel loads and obeys the program")
        return sockets
    }

    /// Sends `packet` from `sender` and returns the index of the socket it arrived at.
    static func arrival(of packet: [UInt8], from sender: UDPSocket, at sockets: [UDPSocket]) -> Int? {
        _ = packet.withUnsafeBytes { sender.send($0, to: nil, from: nil, ecn: 0) }
        var buffer = [UInt8](repeating: 0, count: 2048)
        var descriptors = sockets.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        guard poll(&descriptors, nfds_t(descriptors.count), 1000) > 0 else { return nil }
        for (index, socket) in sockets.enumerated() where descriptors[index].revents != 0 {
            let received = buffer.withUnsafeMutableBytes { try? socket.receive(into: $0) } ?? nil
            if let received, buffer.prefix(received.length).elementsEqual(packet) { return index }
        }
        return nil
    }

    static func shortHeader(_ id: ConnectionID) -> [UInt8] { [0x40] + id.bytes + [UInt8](repeating: 7, count: 30) }

    /// A long header of `type` (0 Initial, 1 0-RTT, 2 Handshake) with destination ID `id`.
    static func longHeader(type: UInt8, _ id: ConnectionID) -> [UInt8] {
        [0xc0 | type << 4, 0, 0, 0, 1, UInt8(id.count)] + id.bytes + [0] + [UInt8](repeating: 7, count: 30)
    }

    @Test(arguments: [2, 3])
    func shortAndHandshakePacketsReachTheLoopTheirIDNames(loops: Int) throws {
        let sockets = try Self.group(loops)
        // Many client ports: the kernel's hash would spread them, the program must not.
        for round in 0..<12 {
            let sender = try UDPSocket(connectingTo: sockets[0].localAddress)
            for index in 0..<loops {
                let id = ConnectionIDSteering(index: index, count: loops).makeID()
                #expect(Self.arrival(of: Self.shortHeader(id), from: sender, at: sockets) == index, "round \(round)")
                #expect(Self.arrival(of: Self.longHeader(type: 2, id), from: sender, at: sockets) == index)
            }
        }
    }

    @Test func initialAnd0RTTPacketsFollowTheKernelHashWhateverTheirID() throws {
        let sockets = try Self.group(2)
        var seen = Set<Int>()
        for _ in 0..<16 {
            let sender = try UDPSocket(connectingTo: sockets[0].localAddress)
            var arrivals = Set<Int>()
            for index in 0..<4 {
                let id = ConnectionIDSteering(index: index % 2, count: 2).makeID()
                for type: UInt8 in [0, 1] {
                    if let arrival = Self.arrival(of: Self.longHeader(type: type, id), from: sender, at: sockets) {
                        arrivals.insert(arrival)
                    }
                }
            }
            #expect(arrivals.count == 1, "one client port, one socket, whatever the client-chosen IDs")
            seen.formUnion(arrivals)
        }
        #expect(seen.count == 2, "16 client ports hash to both sockets (all on one: 1 chance in 32,768)")
    }

    @Test func theSwiftMirrorOfTheProgramAgrees() {
        let id = ConnectionIDSteering(index: 2, count: 3).makeID()
        Self.shortHeader(id).withUnsafeBytes { #expect(ConnectionIDSteering.owner(of: $0, count: 3) == 2) }
        Self.longHeader(type: 2, id).withUnsafeBytes { #expect(ConnectionIDSteering.owner(of: $0, count: 3) == 2) }
        Self.longHeader(type: 0, id).withUnsafeBytes { #expect(ConnectionIDSteering.owner(of: $0, count: 3) == nil) }
        Self.longHeader(type: 1, id).withUnsafeBytes { #expect(ConnectionIDSteering.owner(of: $0, count: 3) == nil) }
        [UInt8]().withUnsafeBytes { #expect(ConnectionIDSteering.owner(of: $0, count: 3) == nil) }
    }

    @Test func anExplicitPortHeldByAnotherGroupIsInUse() throws {
        let sockets = try Self.group(2)
        #expect(throws: TransportError.self) { try ReuseportGroup.bind(sockets[0].localAddress, count: 2) }
    }
}
