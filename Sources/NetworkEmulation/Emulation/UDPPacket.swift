/// Reading and rewriting the UDP datagram inside an IP packet read from a TUN device: the addresses, the ports and
/// the payload, with the IPv4 header checksum and the UDP checksum recomputed after a change. Never allocates a
/// parser state; a packet that is not well-formed UDP is left alone.
enum UDPPacket {
    /// One end of a UDP flow: an address (4 or 16 bytes) and a port.
    struct Endpoint: Hashable, Sendable {
        var address: [UInt8]
        var port: UInt16
    }

    /// Where the UDP header starts when `packet` is IPv4 protocol 17 or IPv6 whose upper-layer header (after any
    /// hop-by-hop, routing, fragment, destination-options or AH extension headers) is 17; nil otherwise.
    static func headerOffset(_ packet: [UInt8]) -> Int? {
        guard let first = packet.first else { return nil }
        switch first >> 4 {
        case 4:
            guard packet.count >= 20 && packet[9] == 17 else { return nil }
            return Int(first & 0x0f) * 4
        case 6:
            guard packet.count >= 40 else { return nil }
            var next = packet[6]
            var offset = 40
            for _ in 0..<16 {  // bounded walk over the extension-header chain
                switch next {
                case 17: return offset
                case 0, 43, 60:  // hop-by-hop, routing, destination options: (length + 1) * 8 bytes
                    guard packet.count >= offset + 2 else { return nil }
                    next = packet[offset]
                    offset += (Int(packet[offset + 1]) + 1) * 8
                case 44:  // fragment: 8 bytes; the upper-layer header is named in every fragment
                    guard packet.count >= offset + 8 else { return nil }
                    next = packet[offset]
                    offset += 8
                case 51:  // authentication header: (length + 2) * 4 bytes
                    guard packet.count >= offset + 2 else { return nil }
                    next = packet[offset]
                    offset += (Int(packet[offset + 1]) + 2) * 4
                default:
                    return nil
                }
            }
            return nil
        default:
            return nil
        }
    }

    /// The UDP header's offset when the whole 8-byte header is present.
    static func completeHeader(_ packet: [UInt8]) -> Int? {
        guard let offset = headerOffset(packet), packet.count >= offset + 8 else { return nil }
        return offset
    }

    private static func addressRange(_ packet: [UInt8], source: Bool) -> Range<Int> {
        packet[0] >> 4 == 4 ? (source ? 12..<16 : 16..<20) : (source ? 8..<24 : 24..<40)
    }

    /// The source or destination endpoint of a UDP packet whose header is at `udp`.
    static func endpoint(_ packet: [UInt8], udp: Int, source: Bool) -> Endpoint {
        let port = source ? udp : udp + 2
        return Endpoint(
            address: Array(packet[addressRange(packet, source: source)]),
            port: UInt16(packet[port]) << 8 | UInt16(packet[port + 1]))
    }

    /// Replaces the source or destination endpoint (same address family) and fixes both checksums.
    static func rewrite(_ packet: inout [UInt8], udp: Int, source: Bool, to endpoint: Endpoint) {
        let range = addressRange(packet, source: source)
        guard endpoint.address.count == range.count else { return }
        packet.replaceSubrange(range, with: endpoint.address)
        let port = source ? udp : udp + 2
        packet[port] = UInt8(endpoint.port >> 8)
        packet[port + 1] = UInt8(endpoint.port & 0xff)
        fixChecksums(&packet, udp: udp)
    }

    /// Recomputes the IPv4 header checksum and the UDP checksum (an IPv4 UDP checksum of 0, "none", stays 0).
    static func fixChecksums(_ packet: inout [UInt8], udp: Int) {
        let isIPv4 = packet[0] >> 4 == 4
        if isIPv4 {
            let headerLength = udp
            packet[10] = 0
            packet[11] = 0
            let sum = ~fold(onesComplementSum(packet[0..<headerLength]))
            packet[10] = UInt8(sum >> 8)
            packet[11] = UInt8(sum & 0xff)
            if packet[udp + 6] == 0 && packet[udp + 7] == 0 { return }
        }
        let declared = Int(packet[udp + 4]) << 8 | Int(packet[udp + 5])
        let length = min(max(declared, 8), packet.count - udp)
        packet[udp + 6] = 0
        packet[udp + 7] = 0
        var sum = onesComplementSum(packet[addressRange(packet, source: true)])
        sum += onesComplementSum(packet[addressRange(packet, source: false)])
        sum += 17 + UInt32(length)
        sum += onesComplementSum(packet[udp..<(udp + length)])
        var checksum = ~fold(sum)
        if checksum == 0 { checksum = 0xffff }
        packet[udp + 6] = UInt8(checksum >> 8)
        packet[udp + 7] = UInt8(checksum & 0xff)
    }

    /// Whether the UDP checksum (when present) matches the packet: what the receiving kernel checks.
    static func checksumIsValid(_ packet: [UInt8]) -> Bool {
        guard let udp = completeHeader(packet) else { return false }
        var copy = packet
        fixChecksums(&copy, udp: udp)
        return copy == packet
    }

    private static func onesComplementSum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var sum: UInt32 = 0
        var index = bytes.startIndex
        while index + 1 < bytes.endIndex {
            sum += UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
            index += 2
        }
        if index < bytes.endIndex { sum += UInt32(bytes[index]) << 8 }
        return sum
    }

    private static func fold(_ value: UInt32) -> UInt16 {
        var sum = value
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return UInt16(sum)
    }
}
