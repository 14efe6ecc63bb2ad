/// Proof, inside a connection ID, that this relay issued it: the last `length` bytes of every ID the relay makes
/// (without QUIC-LB) are an AES-128 tag of the bytes before them under a key only this relay derives (its reset
/// secret, itself derived from the fleet's and the relay's identity: `ServerSecrets.forRelay(_:)`). A relay answers
/// a packet for a connection it does not know with a stateless reset only when the tag holds (RFC 9000 §21.11:
/// never for a connection that may live on another relay sharing the fleet's secret), and checks it statelessly: a
/// relay restarted with the same identity recognises the IDs its previous run gave out.
///
/// The tag looks random to anyone without the key, so it links nothing. One AES block per ID made or checked.
/// Not thread-safe (the cipher handle): one instance per event loop, like the `ConnectionIDIssuer` that holds it.
package final class ConnectionIDTag {
    /// The tag's bytes at the end of each ID: a forged ID passes with probability 2^-32.
    package static let length = 4
    private let cipher: AES128Block

    /// - Throws: `invalidConfiguration` when `key` is not 16 bytes, `tlsFailure` when GnuTLS refuses the cipher.
    package init(key: [UInt8]) throws(TransportError) {
        cipher = try AES128Block(key: key)
    }

    /// `bytes` with its last `length` bytes replaced by the tag of the others (at least `length` + 8 bytes).
    package func signed(_ bytes: [UInt8]) -> [UInt8] {
        precondition(bytes.count >= Self.length + 8, "a tagged connection ID keeps 8 bytes of its own")
        var signed = bytes
        let tag = self.tag(bytes.prefix(bytes.count - Self.length))
        signed.replaceSubrange((bytes.count - Self.length)..., with: tag)
        return signed
    }

    /// Whether `id` carries the tag of this key.
    package func verifies(_ id: ConnectionID) -> Bool {
        let bytes = id.bytes
        guard bytes.count >= Self.length + 8 else { return false }
        return tag(bytes.prefix(bytes.count - Self.length)).elementsEqual(bytes.suffix(Self.length))
    }

    /// The first `length` bytes of the CBC-MAC (AES-128) of the body's length byte then the body, zero-padded to
    /// whole blocks: one block for an 18-byte ID's 14 bytes. The length byte first keeps CBC-MAC sound for bodies
    /// of different lengths.
    private func tag(_ body: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let message = [UInt8(truncatingIfNeeded: body.count)] + body
        var state = [UInt8](repeating: 0, count: 16)
        for start in stride(from: 0, to: message.count, by: 16) {
            for (index, byte) in message[start..<min(start + 16, message.count)].enumerated() { state[index] ^= byte }
            state.withUnsafeMutableBytes { cipher.encrypt($0.baseAddress!) }
        }
        return state.prefix(Self.length)
    }
}
