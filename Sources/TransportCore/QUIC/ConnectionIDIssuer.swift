/// The connection IDs a server event loop issues (long-header source IDs, NEW_CONNECTION_ID, Retry) and, for a
/// received packet, the loop that owns its connection.
///
/// Without QUIC-LB: 18 random bytes, the first naming the loop when there are several (`ConnectionIDSteering`).
/// With QUIC-LB the IDs follow the configuration, and the loop is named by the first byte of the nonce (before
/// encryption): the first octet's config rotation bits are the load balancer's. A plaintext configuration leaves
/// that byte at a fixed place the kernel's steering program can read (`kernelLoopByteOffset`); an encrypted one
/// hides it, so the loops decrypt each packet's ID to find its owner (`owner(of:)`).
///
/// With a key the nonce after the loop byte is a counter from a random start (the draft forbids reusing a nonce);
/// once it has come round, the loop issues unroutable IDs (codepoint `0b111`, the loop byte next, the rest random),
/// which a balancer routes by 4-tuple. Without a key the nonce is random (plaintext nonces must not be linkable).
/// One instance per loop: it holds the configuration's AES handle and the counter.
///
/// Which IDs this relay issued, checkable without state (`issued(_:)`, so a relay never answers another relay's
/// connection with a stateless reset): with QUIC-LB, those carrying its server ID under its configuration; without,
/// those carrying its `ConnectionIDTag` in their last bytes.
package final class ConnectionIDIssuer {
    /// The loop these IDs name, when the server runs several.
    package let steering: ConnectionIDSteering?
    /// The length of every ID issued: 18, or the QUIC-LB configuration's.
    package let length: Int
    private let quicLB: QUICLBCodec?
    /// With a key: the nonces after the loop byte.
    private var nonces: NonceCounter?
    /// The random bytes of every ID and the nonce counter's start.
    private let random: any RandomSource
    /// Without QUIC-LB: the tag every ID ends with (nil: none, and `issued(_:)` claims no ID).
    private var tag: ConnectionIDTag?
    /// Without QUIC-LB, during a rotation of the reset secret: the tag of the IDs issued under the previous one.
    private var previousTag: ConnectionIDTag?

    /// Which of this relay's reset secrets an ID was issued under.
    package enum Generation: Sendable, Equatable {
        /// The current secret (always, with QUIC-LB: its IDs carry no tag to tell them apart).
        case current
        /// The secret being retired (`ServerSecrets.previousStatelessResetSecret`).
        case previous
    }

    /// IDs naming `steering`'s loop, following `quicLB` when given; with a key, taking nonces from `nonces`
    /// (default: a counter from a random start over the nonce's bytes after the loop byte). The random bytes come
    /// from `random` (the kernel's generator by default). Without QUIC-LB, every ID ends with `tag`'s proof.
    package init(
        steering: ConnectionIDSteering? = nil, quicLB: QUICLBCodec? = nil, nonces: NonceCounter? = nil,
        random: any RandomSource = SystemRandom(), tag: ConnectionIDTag? = nil
    ) {
        self.steering = steering
        self.quicLB = quicLB
        self.random = random
        self.tag = quicLB == nil ? tag : nil
        let configuration = quicLB?.configuration
        length = configuration?.connectionIDLength ?? 18
        self.nonces =
            configuration.flatMap { configuration in
                configuration.key == nil
                    ? nil : nonces ?? NonceCounter(start: random.bytes(configuration.nonceLength - 1))
            }
    }

    /// IDs naming `steering`'s loop, following the QUIC-LB `configuration` when given (else ending with `tag`).
    ///
    /// - Throws: `tlsFailure` when GnuTLS refuses the configuration's AES key.
    package convenience init(
        steering: ConnectionIDSteering?, configuration: QUICLBConfiguration?, random: any RandomSource = SystemRandom(),
        tag: ConnectionIDTag? = nil
    ) throws(TransportError) {
        self.init(
            steering: steering, quicLB: try configuration.map { c throws(TransportError) in try QUICLBCodec(c) },
            random: random, tag: tag)
    }

    /// Where the loop byte sits in the IDs `quicLB` makes, for the kernel's steering program: 0 without QUIC-LB,
    /// right after the server ID in plaintext, nil when encrypted (the program cannot decrypt).
    package static func kernelLoopByteOffset(for quicLB: QUICLBConfiguration?) -> Int? {
        guard let quicLB else { return 0 }
        return quicLB.key == nil ? 1 + quicLB.serverID.count : nil
    }

    /// A fresh ID.
    package func makeID() -> ConnectionID {
        guard let quicLB else {
            let id = steering?.makeID(length: 18, using: random) ?? ConnectionID.random(length: 18, using: random)
            return tag.map { ConnectionID($0.signed(id.bytes)) } ?? id
        }
        let configuration = quicLB.configuration
        var bytes = random.bytes(length)  // the first octet's free bits, the loop byte, a random nonce
        bytes[1] = steering?.loopByte(random: bytes[1]) ?? bytes[1]
        guard configuration.key != nil else {
            return quicLB.encode(
                plaintext: configuration.serverID + bytes[1..<(1 + configuration.nonceLength)],
                random: bytes[0])
        }
        guard let nonce = nonces?.next() else {  // no nonce left for this key: unroutable
            bytes[0] = 0xe0 | configuration.firstOctet(random: bytes[0]) & 0x1f
            return ConnectionID(bytes)
        }
        return quicLB.encode(plaintext: configuration.serverID + [bytes[1]] + nonce, random: bytes[0])
    }

    /// Whether this relay (any run of it with the same identity and configuration) issued `id`: with QUIC-LB, `id`
    /// carries this configuration's codepoint and server ID (an unroutable ID, `0b111`, names no relay and is not
    /// claimed); without, its tag holds. A stateless reset answers only these (RFC 9000 §21.11).
    package func issued(_ id: ConnectionID) -> Bool { generation(of: id) != nil }

    /// Under which reset secret this relay issued `id` (nil: not issued here, see `issued(_:)`): the current tag's
    /// IDs first, then the previous tag's during a rotation. With QUIC-LB, `.current` for this relay's server ID.
    package func generation(of id: ConnectionID) -> Generation? {
        guard let quicLB else {
            if tag?.verifies(id) ?? false { return .current }
            return previousTag?.verifies(id) ?? false ? .previous : nil
        }
        return quicLB.serverID(of: id.bytes) == quicLB.configuration.serverID ? .current : nil
    }

    /// From now on IDs end with `tag` and `previousTag`'s are still recognised (a reload that rotated the reset
    /// secret). Without QUIC-LB only: with it, IDs carry no tag.
    package func retag(_ tag: ConnectionIDTag, previous previousTag: ConnectionIDTag?) {
        guard quicLB == nil else { return }
        self.tag = tag
        self.previousTag = previousTag
    }

    /// The loop that owns the connection `packet` belongs to, by its destination ID, or nil when the packet
    /// carries none of ours (a client-chosen ID, another configuration's, a truncated packet) or there is one loop.
    /// With a key, an ID `isOurs` says this loop routes is this loop's without decrypting it (a table lookup
    /// instead of up to four AES blocks, for the packets the kernel's hash already put on the right loop).
    package func owner(
        of packet: UnsafeRawBufferPointer, isOurs: (ConnectionID) -> Bool = { _ in false }
    ) -> Int? {
        guard let steering else { return nil }
        guard let quicLB else { return ConnectionIDSteering.owner(of: packet, count: steering.count) }
        guard let offset = ConnectionIDSteering.serverDCIDOffset(in: packet),
            offset == 1 || Int(packet[5]) == length, packet.count >= offset + length
        else { return nil }
        let id = UnsafeRawBufferPointer(rebasing: packet[offset..<(offset + length)])
        if id[0] >> 5 == 7 { return Int(id[1]) % steering.count }
        let configuration = quicLB.configuration
        guard configuration.key != nil else {  // plaintext: the loop byte follows the server ID
            return Int(id[0] >> 5) == configuration.configRotation
                ? Int(id[1 + configuration.serverID.count]) % steering.count : nil
        }
        if isOurs(ConnectionID(id)) { return steering.index }
        guard let plaintext = quicLB.decode(id) else { return nil }
        return Int(plaintext[configuration.serverID.count]) % steering.count
    }
}
