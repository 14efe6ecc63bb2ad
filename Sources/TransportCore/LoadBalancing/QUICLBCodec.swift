/// Writes and reads QUIC-LB connection IDs for one configuration (draft-ietf-quic-load-balancers-21 §5): the
/// first octet, then the server ID and nonce in the clear or encrypted (single pass when they make one AES block,
/// four pass otherwise). Holds the configuration's AES handle, so it belongs to one thread (one per event loop).
package final class QUICLBCodec {
    package let configuration: QUICLBConfiguration
    private let cipher: AES128Block?

    /// - Throws: `tlsFailure` when GnuTLS refuses the AES key (the configuration was validated when made).
    package init(_ configuration: QUICLBConfiguration) throws(TransportError) {
        self.configuration = configuration
        cipher = try configuration.key.map { key throws(TransportError) in try AES128Block(key: key) }
    }

    /// The connection ID for `plaintext` (the server ID then the nonce, `plaintextLength` bytes), the first octet's
    /// free bits taken from `random`.
    package func encode(plaintext: [UInt8], random: UInt8) -> ConnectionID {
        precondition(plaintext.count == configuration.plaintextLength, "QUIC-LB plaintext of the wrong length")
        let body: [UInt8]
        if let cipher {
            body =
                plaintext.count == 16
                ? Self.singlePass(plaintext, cipher.encrypt) : fourPass(plaintext, cipher, encrypting: true)
        } else {
            body = plaintext
        }
        return ConnectionID([configuration.firstOctet(random: random)] + body)
    }

    /// The server ID and nonce of `id` (decrypted), or nil when `id` has another length or another config
    /// rotation codepoint than this configuration.
    package func decode(_ id: some Collection<UInt8>) -> [UInt8]? {
        guard id.count == configuration.connectionIDLength, let first = id.first,
            Int(first >> 5) == configuration.configRotation
        else { return nil }
        let body = Array(id.dropFirst())
        guard let cipher else { return body }
        return body.count == 16 ? Self.singlePass(body, cipher.decrypt) : fourPass(body, cipher, encrypting: false)
    }

    /// The server ID `id` carries, or nil when it is not an ID of this configuration (see `decode`).
    package func serverID(of id: some Collection<UInt8>) -> [UInt8]? {
        decode(id).map { Array($0.prefix(configuration.serverID.count)) }
    }

    private static func singlePass(_ block: [UInt8], _ transform: (UnsafeMutableRawPointer) -> Void) -> [UInt8] {
        var block = block
        block.withUnsafeMutableBytes { transform($0.baseAddress!) }
        return block
    }
}
