/// A QUIC-LB configuration (draft-ietf-quic-load-balancers-21): how a relay writes its server ID into every
/// connection ID it issues, so that a stateless layer-4 load balancer in front of a fleet routes each packet to the
/// relay that holds the connection even after a NAT rebinding or a client's migration, when the 4-tuple changed and
/// only the destination connection ID still names the relay.
///
/// Every connection ID is `first octet || server ID || nonce`, `1 + serverID.count + nonceLength` bytes. The first
/// octet's three high bits are the config rotation codepoint (`configRotation`), which tells a balancer running
/// several configurations (during a key rotation, say) which one applies; its five low bits are random, or the
/// length of the rest when `encodesLength` is set (for hardware offload that needs self-describing IDs). The load
/// balancer is given the same values: it reads the codepoint, takes the server ID from the following octets
/// (decrypting them first when there is a key) and forwards the packet to that server's address.
///
/// With a `key`, the server ID and nonce are encrypted with AES-128: one block when they are 16 bytes together
/// (single pass), a four-round Feistel network otherwise (four pass), so only holders of the key learn which relay
/// a connection lives on and an observer cannot link a client's connection IDs through the server ID. Without a
/// key, the server ID is in the clear.
public struct QUICLBConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// The config rotation codepoint, 0...6 (7, `0b111`, marks unroutable IDs and is reserved).
    public let configRotation: Int
    /// This relay's server ID, 1...15 bytes, unique in the fleet for this configuration.
    public let serverID: [UInt8]
    /// The nonce's length in bytes, 4...18; `serverID.count + nonceLength` is at most 19.
    public let nonceLength: Int
    /// The 16-byte AES-128 key shared with the load balancer, or nil for plaintext server IDs.
    public let key: [UInt8]?
    /// Whether the first octet's five low bits carry the length of the rest of the ID (else they are random).
    public let encodesLength: Bool

    /// A validated configuration.
    ///
    /// - Throws: `TransportError.Code.invalidConfiguration` naming the value out of range: `configRotation` outside
    ///   0...6, a server ID of 0 or more than 15 bytes, `nonceLength` outside 4...18, server ID and nonce longer
    ///   than 19 bytes together (QUIC v1's 20-byte limit, less the first octet), or a key that is not 16 bytes.
    public init(
        configRotation: Int, serverID: [UInt8], nonceLength: Int, key: [UInt8]? = nil, encodesLength: Bool = false
    ) throws(TransportError) {
        guard (0...6).contains(configRotation) else {
            throw TransportError(
                .invalidConfiguration,
                "QUIC-LB config rotation \(configRotation) is out of range: use 0...6 (7 is reserved for unroutable IDs)"
            )
        }
        guard (1...15).contains(serverID.count) else {
            throw TransportError(
                .invalidConfiguration, "a QUIC-LB server ID has 1...15 bytes, not \(serverID.count)")
        }
        guard (4...18).contains(nonceLength) else {
            throw TransportError(.invalidConfiguration, "a QUIC-LB nonce has 4...18 bytes, not \(nonceLength)")
        }
        guard serverID.count + nonceLength <= 19 else {
            throw TransportError(
                .invalidConfiguration,
                "QUIC-LB server ID (\(serverID.count) bytes) and nonce (\(nonceLength)) exceed 19 bytes together")
        }
        if let key, key.count != 16 {
            throw TransportError(.invalidConfiguration, "a QUIC-LB key has 16 bytes, not \(key.count)")
        }
        self.configRotation = configRotation
        self.serverID = serverID
        self.nonceLength = nonceLength
        self.key = key
        self.encodesLength = encodesLength
    }

    /// The configuration in `serve --quic-lb` form, the key left out (`key=…` when there is one): safe to log.
    public var description: String {
        "cr=\(configRotation),server-id=\(Hex.string(serverID)),"
            + "nonce-len=\(nonceLength)\(key == nil ? "" : ",key=…")\(encodesLength ? ",encode-len" : "")"
    }

    /// The length of every connection ID this configuration makes: the first octet, the server ID and the nonce.
    public var connectionIDLength: Int { 1 + plaintextLength }

    /// The server ID and nonce together, in bytes (what is encrypted).
    var plaintextLength: Int { serverID.count + nonceLength }

    /// The first octet of an ID: the codepoint, then the length or five bits of `random`.
    func firstOctet(random: UInt8) -> UInt8 {
        UInt8(configRotation << 5) | (encodesLength ? UInt8(plaintextLength) : random & 0x1f)
    }
}
