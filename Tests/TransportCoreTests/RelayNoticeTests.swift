import Testing

@testable import TransportCore

/// The relay's notice stream carries at most `RelayNotice.maximumLength` bytes; only a well-formed `move` is a
/// notice, and anything else (a newer relay's notice, garbage) is ignored, never an error.
@Suite struct RelayNoticeTests {
    @Test func aMoveNoticeReadsBack() {
        for milliseconds: UInt64 in [0, 10_000, UInt64.max] {
            let bytes = RelayNotice.move(closingIn: milliseconds).encoded()
            #expect(bytes.count == 16 && bytes.count <= RelayNotice.maximumLength)
            #expect(RelayNotice(decoding: bytes) == .move(closingIn: milliseconds))
        }
    }

    @Test func anythingElseIsNoNotice() {
        let move = RelayNotice.move(closingIn: 5).encoded()
        for garbage in [
            [], Array(move.prefix(15)), move + [0], Array("ptt-mov!".utf8) + move.suffix(8),
            [UInt8](repeating: 0xff, count: RelayNotice.maximumLength),
        ] {
            #expect(RelayNotice(decoding: garbage) == nil, "\(garbage)")
        }
    }
}
