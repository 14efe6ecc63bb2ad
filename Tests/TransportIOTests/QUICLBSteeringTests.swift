import Testing
import TransportCore

@testable import TransportIO

/// Steering with QUIC-LB connection IDs on real sockets: with a plaintext configuration the kernel's program reads
/// the loop byte after the server ID; with a key it cannot, and the group falls back to forwarding.
@Suite("SO_REUSEPORT steering with QUIC-LB IDs (real sockets)")
struct QUICLBSteeringTests {
    @Test(arguments: [2, 3])
    func aPlaintextConfigurationKeepsTheKernelProgram(loops: Int) throws {
        let configuration = try QUICLBConfiguration(configRotation: 2, serverID: [9, 8, 7], nonceLength: 5)
        let sockets = try ReuseportGroup.bind(SocketAddress(parsing: "127.0.0.1:0")!, count: loops)
        defer { for socket in sockets { socket.close() } }
        #expect(ReuseportGroup.steer(sockets, quicLB: configuration) == .kernelProgram)
        for round in 0..<8 {
            let sender = try UDPSocket(connectingTo: sockets[0].localAddress)
            defer { sender.close() }
            for index in 0..<loops {
                let issuer = try ConnectionIDIssuer(
                    steering: ConnectionIDSteering(index: index, count: loops), configuration: configuration)
                let id = issuer.makeID()
                let short = ReuseportGroupTests.shortHeader(id)
                #expect(ReuseportGroupTests.arrival(of: short, from: sender, at: sockets) == index, "round \(round)")
                let handshake = ReuseportGroupTests.longHeader(.handshake, id)
                #expect(ReuseportGroupTests.arrival(of: handshake, from: sender, at: sockets) == index)
            }
        }
    }

    @Test func anEncryptedConfigurationForwards() throws {
        let configuration = try QUICLBConfiguration(
            configRotation: 0, serverID: [1], nonceLength: 4, key: [UInt8](repeating: 3, count: 16))
        let sockets = try ReuseportGroup.bind(SocketAddress(parsing: "127.0.0.1:0")!, count: 2)
        defer { for socket in sockets { socket.close() } }
        #expect(ReuseportGroup.steer(sockets, quicLB: configuration) == .forwarding)
    }
}
