/// The four-pass algorithm (draft-ietf-quic-load-balancers-21 §5.5.2 and §5.6.2): a four-round Feistel network
/// over the two halves of the server ID and nonce, AES-128 of the expanded other half as its round function. With
/// an odd length the halves share the middle octet: the left half keeps its high four bits, the right half its
/// low four, and the bits a half does not own are cleared after every round.
extension QUICLBCodec {
    /// Encrypts (passes 1 to 4) or decrypts (4 to 1) the server ID and nonce: odd passes change the right half
    /// from the left, even passes the left from the right.
    func fourPass(_ input: [UInt8], _ cipher: AES128Block, encrypting: Bool) -> [UInt8] {
        let length = input.count
        var (left, right) = Self.halves(input)
        for pass: UInt8 in encrypting ? [1, 2, 3, 4] : [4, 3, 2, 1] {
            if pass % 2 == 1 {
                right = Self.round(right, pass: pass, left, length, cipher)
            } else {
                left = Self.round(left, pass: pass, right, length, cipher)
            }
        }
        return Self.join(left, right, length)
    }

    /// `left_0` and `right_0` (or `left_2` and `right_2`): `half_len` octets each, the shared nibbles cleared.
    static func halves(_ bytes: [UInt8]) -> ([UInt8], [UInt8]) {
        let half = (bytes.count + 1) / 2
        var left = Array(bytes.prefix(half))
        var right = Array(bytes.suffix(half))
        if bytes.count % 2 == 1 {
            left[half - 1] &= 0xf0
            right[0] &= 0x0f
        }
        return (left, right)
    }

    /// `target` XOR the first `half_len` octets of AES(expand(length, pass, input)), its foreign nibble cleared:
    /// the high four bits of a right half (odd passes), the low four of a left half (even passes).
    static func round(
        _ target: [UInt8], pass: UInt8, _ input: [UInt8], _ length: Int, _ cipher: AES128Block
    ) -> [UInt8] {
        var result = target
        var block: (UInt64, UInt64) = (0, 0)  // on the stack: no allocation per pass
        withUnsafeMutableBytes(of: &block) { block in
            for (index, byte) in input.enumerated() { block[index] = byte }
            block[14] = UInt8(length)
            block[15] = pass
            cipher.encrypt(block.baseAddress!)
            for index in result.indices { result[index] ^= block[index] }
        }
        if length % 2 == 1 {
            if pass % 2 == 1 { result[0] &= 0x0f } else { result[result.count - 1] &= 0xf0 }
        }
        return result
    }

    /// The halves back together; with an odd length their shared octet is merged (its nibbles are disjoint).
    static func join(_ left: [UInt8], _ right: [UInt8], _ length: Int) -> [UInt8] {
        guard length % 2 == 1 else { return left + right }
        var result = left
        result[result.count - 1] |= right[0]
        result.append(contentsOf: right.dropFirst())
        return result
    }
}
