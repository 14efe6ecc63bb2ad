import TransportCore

/// The rebinding NAT's mappings, sans-IO: the client's real UDP endpoints on one side, the public endpoints the
/// server sees on the other. Generation 0 maps every endpoint to itself; each later generation gives every flow a
/// fresh public port (and address, with `rewriteAddress`) when it next sends, and retires the old public endpoint:
/// server packets to a retired endpoint are dropped, as a NAT that deleted the mapping would.
struct NATTable {
    enum Inbound: Equatable {
        /// Deliver to this real endpoint.
        case deliver(UDPPacket.Endpoint)
        /// The mapping was deleted: drop.
        case drop
        /// Not a NAT endpoint (e.g. nothing ever sent through the NAT from there): leave it alone.
        case pass
    }

    let rewriteAddress: Bool
    private(set) var generation = 0
    private var forward: [UDPPacket.Endpoint: (public: UDPPacket.Endpoint, generation: Int)] = [:]
    private var reverse: [UDPPacket.Endpoint: UDPPacket.Endpoint] = [:]
    private var retired: Set<UDPPacket.Endpoint> = []
    private var random: UInt64

    init(rewriteAddress: Bool, seed: UInt64) {
        self.rewriteAddress = rewriteAddress
        self.random = seed
    }

    /// Moves to `generation` (never backwards): every current mapping is deleted.
    mutating func advance(to generation: Int) {
        guard generation > self.generation else { return }
        self.generation = generation
        for (_, mapping) in forward where !retired.contains(mapping.public) {
            retired.insert(mapping.public)
            reverse[mapping.public] = nil
        }
        forward.removeAll()
    }

    /// The public endpoint for a packet the client sends from `real`.
    mutating func outbound(_ real: UDPPacket.Endpoint) -> UDPPacket.Endpoint {
        if let mapping = forward[real], mapping.generation == generation { return mapping.public }
        var candidate = real
        if generation > 0 {
            repeat {
                candidate = real
                candidate.port = UInt16(1024 + next() % (65536 - 1024))
                if rewriteAddress { candidate.address = movedAddress(real.address) }
            } while candidate == real || reverse[candidate] != nil || retired.contains(candidate)
        }
        retired.remove(candidate)
        forward[real] = (candidate, generation)
        reverse[candidate] = real
        return candidate
    }

    /// What to do with a server packet sent to `destination`.
    func inbound(_ destination: UDPPacket.Endpoint) -> Inbound {
        if let real = reverse[destination] { return .deliver(real) }
        return retired.contains(destination) ? .drop : .pass
    }

    /// Another host of the same subnet: IPv4 keeps the /24 and takes a host number in 10...249 (the emulator's own
    /// hosts are .1 and .2); IPv6 keeps the /64 and randomizes the last two bytes.
    private mutating func movedAddress(_ address: [UInt8]) -> [UInt8] {
        var moved = address
        if moved.count == 4 {
            moved[3] = UInt8(10 + next() % 240)
        } else if moved.count == 16 {
            let value = next()
            moved[14] = UInt8(0x10 | (value >> 8) & 0x0f)  // never ::1 or ::2
            moved[15] = UInt8(value & 0xff)
        }
        return moved
    }

    private mutating func next() -> UInt64 { SplitMix64.next(&random) }
}
