import Testing

@testable import TransportCore

@Suite("MessageDecoder keeps no bytes past its cap")
struct MessageDecoderTests {
    @Test func oversizedPrefixDropsTheBufferAndRefusesLaterChunks() {
        var decoder = MessageDecoder(maximumSize: 1024)
        #expect((try? decoder.feed(MessageFraming.frame(Array("hello".utf8)))) == [Array("hello".utf8)])
        // A 2^61-byte prefix, with some of the body in the same chunk.
        let huge: [UInt8] = [0xE0, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0x41, count: 4000)
        #expect(throws: TransportError.self) { try decoder.feed(huge) }
        let partial = decoder.hasPartialMessage
        #expect(!partial)
        // Every later chunk is refused and dropped, even one that would frame correctly.
        for _ in 0..<3 {
            do {
                _ = try decoder.feed(MessageFraming.frame([1, 2, 3]))
                Issue.record("a chunk after the oversized prefix was accepted")
            } catch {
                #expect(error.code == .messageTooLarge)
                #expect(error.message.contains("2305843009213693952-byte message; the maximum is 1024 bytes"))
            }
        }
        let kept = decoder.takeBuffered().count
        #expect(kept == 0)
    }

    @Test func aPartialMessageUpToTheCapIsKept() throws {
        var decoder = MessageDecoder(maximumSize: 1024)
        let framed = MessageFraming.frame([UInt8](repeating: 7, count: 1024))
        #expect(try decoder.feed(framed.prefix(600)).isEmpty)
        #expect(decoder.hasPartialMessage)
        #expect(try decoder.feed(framed.dropFirst(600)) == [[UInt8](repeating: 7, count: 1024)])
        #expect(!decoder.hasPartialMessage)
    }
}
