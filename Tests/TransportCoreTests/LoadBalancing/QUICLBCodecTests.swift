import Testing

@testable import TransportCore

/// QUIC-LB configurations: validation with typed errors, encode/decode round trips over many random
/// configurations (every length, both algorithms, with and without a key), and the IDs a loop issues.
@Suite("QUIC-LB configurations and codec")
struct QUICLBCodecTests {
    static func randomConfiguration(using generator: inout some RandomNumberGenerator) throws -> QUICLBConfiguration {
        let serverIDLength = Int.random(in: 1...15, using: &generator)
        return try QUICLBConfiguration(
            configRotation: Int.random(in: 0...6, using: &generator),
            serverID: (0..<serverIDLength).map { _ in UInt8.random(in: 0...255, using: &generator) },
            nonceLength: Int.random(in: 4...(19 - serverIDLength), using: &generator),
            key: Bool.random(using: &generator)
                ? (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) } : nil,
            encodesLength: Bool.random(using: &generator))
    }

    @Test func everyConfigurationRoundTrips() throws {
        var generator = SystemRandomNumberGenerator()
        var singlePass = 0
        var encrypted = 0
        for _ in 0..<400 {
            let configuration = try Self.randomConfiguration(using: &generator)
            let codec = try QUICLBCodec(configuration)
            let length = configuration.serverID.count + configuration.nonceLength
            if configuration.key != nil { encrypted += 1 }
            if configuration.key != nil && length == 16 { singlePass += 1 }
            for _ in 0..<8 {
                let plaintext =
                    configuration.serverID + (0..<configuration.nonceLength).map { _ in UInt8.random(in: 0...255) }
                let id = codec.encode(plaintext: plaintext, random: .random(in: 0...255)).bytes
                #expect(id.count == configuration.connectionIDLength)
                #expect(Int(id[0] >> 5) == configuration.configRotation)
                if configuration.encodesLength { #expect(Int(id[0] & 0x1f) == length) }
                #expect(codec.decode(id) == plaintext, "\(configuration)")
                #expect(codec.serverID(of: id) == configuration.serverID)
                if configuration.key == nil {
                    #expect(Array(id.dropFirst()) == plaintext)
                } else {
                    #expect(Array(id.dropFirst()) != plaintext, "encrypted (equal by chance: 1 in 2^40 or less)")
                }
            }
        }
        #expect(encrypted > 100 && singlePass > 0, "both algorithms ran: \(encrypted) encrypted, \(singlePass) single")
    }

    @Test func anIDOfAnotherCodepointOrLengthDoesNotDecode() throws {
        let configuration = try QUICLBConfiguration(configRotation: 2, serverID: [1, 2], nonceLength: 6)
        let codec = try QUICLBCodec(configuration)
        let id = codec.encode(plaintext: [1, 2, 3, 4, 5, 6, 7, 8], random: 0).bytes
        #expect(codec.decode([0x60] + id.dropFirst()) == nil)
        #expect(codec.decode(id.dropLast()) == nil)
        #expect(codec.decode([]) == nil)
    }

    @Test(arguments: [
        (7, 2, 4, 0, "config rotation 7"),
        (-1, 2, 4, 0, "config rotation -1"),
        (0, 0, 4, 0, "server ID has 1...15 bytes, not 0"),
        (0, 16, 4, 0, "server ID has 1...15 bytes, not 16"),
        (0, 2, 3, 0, "nonce has 4...18 bytes, not 3"),
        (0, 2, 19, 0, "nonce has 4...18 bytes, not 19"),
        (0, 10, 10, 0, "exceed 19 bytes"),
        (0, 2, 4, 15, "key has 16 bytes, not 15"),
        (0, 2, 4, 32, "key has 16 bytes, not 32"),
    ])
    func badValuesAreTypedErrors(
        configRotation: Int, serverIDLength: Int, nonceLength: Int, keyLength: Int, says: String
    ) {
        let error = #expect(throws: TransportError.self) {
            try QUICLBConfiguration(
                configRotation: configRotation, serverID: [UInt8](repeating: 1, count: serverIDLength),
                nonceLength: nonceLength, key: keyLength == 0 ? nil : [UInt8](repeating: 2, count: keyLength))
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains(says) == true, "\(error?.message ?? "")")
    }

    static let plaintext = try! QUICLBConfiguration(configRotation: 1, serverID: [0xab, 0xcd], nonceLength: 6)
    static let fourPass = try! QUICLBConfiguration(
        configRotation: 3, serverID: [0x0f, 0xed, 0xcb], nonceLength: 8, key: Array(0..<16))
    static let singlePass = try! QUICLBConfiguration(
        configRotation: 5, serverID: Array(1...8), nonceLength: 8, key: Array(16..<32), encodesLength: true)

    /// A loop's IDs: its configuration's length and codepoint, its server ID, all distinct, and a packet with one
    /// as destination names the loop (short header and Handshake; an Initial names none).
    @Test(arguments: [plaintext, fourPass, singlePass])
    func eachLoopsIDsNameItAndTheServer(_ configuration: QUICLBConfiguration) throws {
        let codec = try QUICLBCodec(configuration)
        let firstLoop = try ConnectionIDIssuer(
            steering: ConnectionIDSteering(index: 0, count: 3), configuration: configuration)
        for index in 0..<3 {
            let issuer = try ConnectionIDIssuer(
                steering: ConnectionIDSteering(index: index, count: 3), configuration: configuration)
            #expect(issuer.length == configuration.connectionIDLength)
            var seen = Set<ConnectionID>()
            for _ in 0..<500 {
                let id = issuer.makeID()
                seen.insert(id)
                #expect(codec.serverID(of: id.bytes) == configuration.serverID)
                ([0x40] + id.bytes + [1, 2, 3]).withUnsafeBytes { packet in
                    #expect(issuer.owner(of: packet) == index)
                    #expect(firstLoop.owner(of: packet) == index, "another loop finds the owner too")
                    #expect(issuer.owner(of: packet) { $0 == id } == index, "found in the loop's table")
                }
                let long = [0xe0, 0, 0, 0, 1, UInt8(id.count)] + id.bytes + [0, 9, 9]
                long.withUnsafeBytes { #expect(issuer.owner(of: $0) == index) }
                ([0xc0] + long.dropFirst()).withUnsafeBytes { #expect(issuer.owner(of: $0) == nil) }
                if let offset = ConnectionIDIssuer.kernelLoopByteOffset(for: configuration) {
                    #expect(Int(id.bytes[offset]) % 3 == index, "the byte the kernel's program reads")
                }
            }
            #expect(seen.count == 500, "every ID distinct")
        }
        #expect((ConnectionIDIssuer.kernelLoopByteOffset(for: configuration) == nil) == (configuration.key != nil))
    }

    @Test func theNonceCounterHandsOutEveryValueOnce() {
        var counter = NonceCounter(start: [0xfe])
        var seen: [[UInt8]] = []
        while let nonce = counter.next() { seen.append(nonce) }
        #expect(seen.count == 255 && Set(seen).count == 255 && !seen.contains([0xfe]), "wraps past 0xff to 0xfd")
        #expect(seen.prefix(3) == [[0xff], [0x00], [0x01]] && seen.last == [0xfd])
        var wide = NonceCounter(start: [0x00, 0xff, 0xff])
        #expect(wide.next() == [0x01, 0x00, 0x00])
    }

    /// Once the nonces run out, a loop issues unroutable IDs (codepoint 0b111, the configuration's length) that
    /// still name its loop.
    @Test func noNonceLeftMeansUnroutableIDsThatStillNameTheLoop() throws {
        let issuer = ConnectionIDIssuer(
            steering: ConnectionIDSteering(index: 1, count: 2), quicLB: try QUICLBCodec(Self.fourPass),
            nonces: NonceCounter(start: [0, 0, 0, 0, 0, 0, 0], remaining: 3))
        let codec = try QUICLBCodec(Self.fourPass)
        for index in 0..<6 {
            let id = issuer.makeID()
            #expect(id.count == Self.fourPass.connectionIDLength)
            #expect((id.bytes[0] >> 5 == 7) == (index >= 3), "ID \(index): \(id)")
            #expect((codec.serverID(of: id.bytes) == Self.fourPass.serverID) == (index < 3))
            ([0x40] + id.bytes).withUnsafeBytes { #expect(issuer.owner(of: $0) == 1) }
        }
    }

    @Test func theDescriptionLeavesTheKeyOut() throws {
        let text = "cr=3,server-id=0a0b,nonce-len=5,key=00112233445566778899aabbccddeeff,encode-len"
        let configuration = try QUICLBConfiguration(parsing: text)
        #expect(configuration.description == "cr=3,server-id=0a0b,nonce-len=5,key=…,encode-len")
        #expect(configuration.key == Hex.bytes("00112233445566778899aabbccddeeff") && configuration.encodesLength)
        #expect(try QUICLBConfiguration(parsing: configuration.description.replacing(",key=…", with: "")).key == nil)
    }

    @Test func withoutQUICLBTheIDsAreTodays() {
        let issuer = ConnectionIDIssuer(steering: ConnectionIDSteering(index: 1, count: 2))
        let id = issuer.makeID()
        #expect(id.count == 18 && issuer.length == 18 && Int(id.bytes[0]) % 2 == 1)
        #expect(ConnectionIDIssuer.kernelLoopByteOffset(for: nil) == 0)
        #expect(ConnectionIDIssuer().makeID().count == 18)
    }
}
