import Testing

@testable import TransportCore

/// The test vectors of draft-ietf-quic-load-balancers-21 (appendix "Load Balancer Test Vectors", and the worked
/// example of §5.5.2.4): each encodes to the printed connection ID and decodes back to its server ID and nonce.
/// Two printed vectors contradict the draft's own text; their tests check the consistent reading and say why.
@Suite("QUIC-LB test vectors (draft-21)")
struct QUICLBVectorTests {
    struct Vector: CustomStringConvertible, Sendable {
        let configRotation: Int
        let serverID: String
        let nonce: String
        let key: String?
        let connectionID: String
        var description: String { "cr \(configRotation) sid \(serverID) nonce \(nonce) → \(connectionID)" }
    }

    static let key = "8f95f09245765f80256934e50c66207f"

    /// Every vector as printed that the text agrees with ("the server is configured to encode the CID length").
    static let vectors: [Vector] = [
        // Unencrypted.
        Vector(configRotation: 0, serverID: "c4605e", nonce: "4504cc4f", key: nil, connectionID: "07c4605e4504cc4f"),
        // Encrypted: four pass with an odd length (7), four pass with the server ID longer than the nonce (a fourth
        // decryption pass), single pass (16).
        Vector(
            configRotation: 0, serverID: "ed793a", nonce: "ee080dbf", key: key, connectionID: "0720b1d07b359d3c"),
        Vector(
            configRotation: 1, serverID: "ed793a51d49b8f5fab65", nonce: "ee080dbf48", key: key,
            connectionID: "2fcc381bc74cb4fbad2823a3d1f8fed2"),
        Vector(
            configRotation: 2, serverID: "ed793a51d49b8f5f", nonce: "ee080dbf48c0d1e5", key: key,
            connectionID: "504dd2d05a7b0de9b2b9907afb5ecf8cc3"),
        // §5.5.2.4, the worked four-pass example.
        Vector(
            configRotation: 0, serverID: "31441a", nonce: "9c69c275", key: "fdf726a9893ec05c0632d3956680baf0",
            connectionID: "0767947d29be054a"),
    ]

    static func hex(_ text: String) -> [UInt8] { Hex.bytes(text)! }

    static func codec(_ vector: Vector) throws -> QUICLBCodec {
        try QUICLBCodec(
            QUICLBConfiguration(
                configRotation: vector.configRotation, serverID: hex(vector.serverID),
                nonceLength: vector.nonce.count / 2, key: vector.key.map(hex), encodesLength: true))
    }

    @Test(arguments: vectors)
    func encodesAndDecodes(_ vector: Vector) throws {
        let codec = try Self.codec(vector)
        let plaintext = Self.hex(vector.serverID + vector.nonce)
        #expect(codec.encode(plaintext: plaintext, random: 0xff).bytes == Self.hex(vector.connectionID))
        #expect(codec.decode(Self.hex(vector.connectionID)) == plaintext)
        #expect(codec.serverID(of: Self.hex(vector.connectionID)) == Self.hex(vector.serverID))
    }

    /// The fourth encrypted vector prints cr_bits 3 but its connection ID starts with 0x12: config rotation bits
    /// 000 and length 18. With cr 3 the first octet is 0x72 (0b011 << 5 | 18); the 18 octets after it match the
    /// draft's bytes exactly, so only the first octet of the printed ID is wrong (it was made with cr 0).
    @Test func theFourthEncryptedVectorsFirstOctetCarriesTheWrongConfigRotation() throws {
        let printed = Self.hex("125779c9cc86beb3a3a4a3ca96fce4bfe0cdbc")
        let vector = Vector(
            configRotation: 3, serverID: "ed793a51d49b8f5fab", nonce: "ee080dbf48c0d1e55d", key: Self.key,
            connectionID: "725779c9cc86beb3a3a4a3ca96fce4bfe0cdbc")
        try encodesAndDecodes(vector)
        #expect(printed[0] >> 5 == 0 && printed[0] & 0x1f == 18, "the printed first octet: cr 0, length 18")
        #expect(try Self.codec(vector).decode(printed) == nil, "a cr 3 configuration does not accept a cr 0 ID")
        let asPrintedCodepoint = try Self.codec(
            Vector(
                configRotation: 0, serverID: vector.serverID, nonce: vector.nonce, key: Self.key,
                connectionID: ""))
        #expect(asPrintedCodepoint.serverID(of: printed) == Self.hex(vector.serverID))
    }

    /// The second unencrypted vector prints the nonce `3487d970b` (nine hex digits: not whole octets) and the ID
    /// `20a350d28b4203487d970b`, whose first octet 0x20 has length bits 0 although the ID encodes its length and
    /// whose next five octets are not the server ID `350d28b420`. The printed ID is `2`, `0a`, the server ID and
    /// the nonce without its leading zero written one after the other: the first octet 0x2a (cr 1 = 0b001 << 5,
    /// length 10) printed as two numbers and the nonce `03487d970b` printed without its leading zero. The
    /// consistent vector: nonce 03487d970b, ID 2a350d28b42003487d970b.
    @Test func theSecondUnencryptedVectorIsMisprinted() throws {
        let printed = "20a350d28b4203487d970b"
        #expect("3487d970b".count % 2 == 1, "the printed nonce is not a whole number of octets")
        #expect(printed == "2" + "0a" + "350d28b420" + "3487d970b")
        let vector = Vector(
            configRotation: 1, serverID: "350d28b420", nonce: "03487d970b", key: nil,
            connectionID: "2a350d28b42003487d970b")
        try encodesAndDecodes(vector)
        let codec = try Self.codec(vector)
        #expect(codec.serverID(of: Self.hex(printed)) == Self.hex("a350d28b42"), "the printed ID names another server")
    }

    /// §5.5.2.4's intermediate AES outputs, and its step 10, which XORs `0xb3e4357c` although the AES output it
    /// truncates is `0xb334357c...`: the printed left_2 (`0x67947d2c`) and the final ID follow from the output,
    /// so the XOR operand is the typo.
    @Test func theWorkedExamplesIntermediateValues() throws {
        let cipher = try AES128Block(key: Self.hex("fdf726a9893ec05c0632d3956680baf0"))
        for (input, output) in [
            ("31441a90000000000000000000000701", "a255dd8cdacf01948d3a848c3c7fee23"),
            ("0e3c1ff9000000000000000000000702", "e5e452cb9e1bedb0b2bf830506bf4c4e"),
            ("d4a04850000000000000000000000703", "b7821ab3024fed0913b6a04d18e3216f"),
            ("09be054a000000000000000000000704", "b334357cfdf81e3fafe180154eaf7378"),
        ] {
            var block = Self.hex(input)
            block.withUnsafeMutableBytes { cipher.encrypt($0.baseAddress!) }
            #expect(block == Self.hex(output), "AES(\(input))")
            block.withUnsafeMutableBytes { cipher.decrypt($0.baseAddress!) }
            #expect(block == Self.hex(input))
        }
        let leftOne = Self.hex("d4a04850")
        #expect(zip(leftOne, Self.hex("b334357c")).map { $0 ^ $1 } == Self.hex("67947d2c"))
        #expect(zip(leftOne, Self.hex("b3e4357c")).map { $0 ^ $1 } != Self.hex("67947d2c"))
        #expect(QUICLBCodec.halves(Self.hex("7040b81b55ccf3")) == (Self.hex("7040b810"), Self.hex("0b55ccf3")))
    }
}
