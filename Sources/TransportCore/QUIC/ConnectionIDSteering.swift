/// Which of a server's event loops owns a connection, written into every connection ID the server issues: the
/// first byte of each server ID is congruent to the loop's index modulo the loop count (the rest is random). A
/// steering program in the kernel (or, failing that, the loop that received a packet) reads that byte from a
/// packet's destination connection ID and hands the packet to the owning loop.
///
/// Packets whose destination ID the client chose (Initial and 0-RTT) carry no loop index: they stay wherever the
/// kernel's 4-tuple hash put them, which is where the connection was accepted.
package struct ConnectionIDSteering: Sendable, Equatable {
    /// The loop this steering issues IDs for, `0..<count`.
    package let index: Int
    /// The number of loops (1...256).
    package let count: Int

    package init(index: Int, count: Int) {
        precondition(count >= 1 && count <= 256 && index >= 0 && index < count, "loop index out of range")
        self.index = index
        self.count = count
    }

    /// A fresh random connection ID of `length` bytes (at least 1) whose first byte names this loop. One request
    /// to the kernel's generator per ID (a server issues several per connection); the first byte keeps a random
    /// multiple of `count` plus `index`. The bytes come from `random` (the kernel's generator by default).
    package func makeID(length: Int = 18, using random: any RandomSource = SystemRandom()) -> ConnectionID {
        var bytes = random.bytes(max(1, length))
        bytes[0] = loopByte(random: bytes[0])
        return ConnectionID(bytes)
    }

    /// A byte naming this loop: a multiple of `count` chosen by `random`, plus `index`.
    package func loopByte(random: UInt8) -> UInt8 {
        UInt8(Int(random) % (256 / count) * count + index)
    }

    /// Where the DCID of `packet` starts when the packet carries a server-chosen one: byte 1 of a short header,
    /// byte 6 of a long-header Handshake or Retry packet (with the DCID's length at byte 5, non-zero); nil for
    /// Initial and 0-RTT packets (client-chosen IDs), a version whose packet types are unknown, an empty ID or a
    /// truncated packet. The type is read as the packet's version numbers it (`LongPacketType`: v1 and v2 differ).
    package static func serverDCIDOffset(in packet: UnsafeRawBufferPointer) -> Int? {
        guard let first = packet.first else { return nil }
        if first & 0x80 == 0 { return packet.count > 1 ? 1 : nil }
        guard packet.count > 6, packet[5] > 0, LongPacketType(packet: packet)?.carriesServerChosenID == true else {
            return nil
        }
        return 6
    }

    /// The loop a UDP payload is steered to among `count` loops, or nil when the packet carries no loop index
    /// (a long-header Initial or 0-RTT packet, whose destination ID the client chose, or a truncated packet).
    /// The kernel's steering program (`ReuseportSteering` in TransportIO) makes the same choice.
    package static func owner(of packet: UnsafeRawBufferPointer, count: Int) -> Int? {
        serverDCIDOffset(in: packet).map { Int(packet[$0]) % count }
    }
}
