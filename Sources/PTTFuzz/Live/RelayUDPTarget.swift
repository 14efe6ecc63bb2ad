import Glibc
import TransportCore
import TransportIO

/// Datagrams to the relay's QUIC socket, each from a fresh source port: random bytes (sometimes behind a valid
/// QUIC v1 long-header prefix) and mutated copies of captured flights (Initial, 0-RTT, 1-RTT). An input is
/// "accepted" when the relay answered within 2 ms, "rejected" when it stayed silent.
enum RelayUDPTarget {
    static let name = "relay-udp"

    static func run(
        count: Int, seeds: [[UInt8]], context: LiveContext, random: inout FuzzRandom
    ) async
        -> TargetResult
    {
        let relay = context.relay.address
        return await context.drive(name, count: count, random: &random) {
            next(seeds: seeds, random: &$0)
        } deliver: {
            input, buffer in
            guard let socket = try? UDPSocket(connectingTo: relay) else { return .undelivered("no UDP socket") }
            defer { socket.close() }
            input.withUnsafeBytes { _ = socket.send($0, to: nil, from: nil, ecn: 0) }
            guard !Poll.readable([socket.fd], milliseconds: 2).isEmpty,
                let received = try? socket.receive(into: buffer), received.length > 0
            else { return .rejected }
            return .accepted
        }
    }

    /// A mutated captured datagram (three in four), else random bytes, half of them behind a QUIC v1 long
    /// header (Initial, 0-RTT, Handshake or Retry type) with random connection-ID lengths.
    static func next(seeds: [[UInt8]], random: inout FuzzRandom) -> [UInt8] {
        if !seeds.isEmpty && !random.oneIn(4) {
            return Mutator.mutate(seeds[random.below(seeds.count)], corpus: seeds, using: &random)
        }
        var bytes: [UInt8] = []
        if random.oneIn(2) {
            bytes = [0xc0 | UInt8(random.below(4)) << 4 | UInt8(random.below(16)), 0, 0, 0, 1]
            for _ in 0..<2 {
                let length = random.oneIn(8) ? random.below(256) : random.below(21)
                bytes.append(UInt8(length))
                bytes += random.bytes(length)
            }
        }
        bytes += random.bytes(random.oneIn(2) ? 1200 : random.below(1500))
        return bytes.isEmpty ? [0] : bytes
    }
}
