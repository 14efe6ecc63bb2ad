import PTTTransport
import Testing
import TransportCore

/// The request envelope on its own: round trips at every ID width, and garbage refused with a typed error.
@Suite("Request envelope: an ID, then the body")
struct RequestEnvelopeTests {
    @Test(arguments: [0, 63, 64, 16_383, 16_384, 1 << 30, (1 << 62) - 1] as [UInt64])
    func roundTripsAtEveryIDWidth(id: UInt64) throws {
        let envelope = RequestEnvelope(id: id, body: Array("talk".utf8))
        #expect(try RequestEnvelope(decoding: envelope.encoded) == envelope)
        #expect(try RequestEnvelope(decoding: envelope.reply([]).encoded) == RequestEnvelope(id: id, body: []))
    }

    @Test(arguments: [[], [0x40], [0x80, 0, 0], [0xc0, 1, 2, 3, 4, 5, 6]] as [[UInt8]])
    func garbageIsRequestMalformed(bytes: [UInt8]) {
        #expect(throws: TransportError.self) { try RequestEnvelope(decoding: bytes) }
        do {
            _ = try RequestEnvelope(decoding: bytes)
        } catch {
            #expect(error.code == .requestMalformed, "\(error)")
        }
    }

    @Test func randomBytesNeverCrashTheDecoder() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0..<12, using: &generator)).map { _ in UInt8.random(in: 0...255) }
            if let envelope = try? RequestEnvelope(decoding: bytes) {
                #expect(Array(bytes.suffix(envelope.body.count)) == envelope.body)
            }
        }
    }
}
