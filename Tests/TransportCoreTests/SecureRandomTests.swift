import Testing

@testable import TransportCore

/// The default source of connection IDs and reset tokens (`SecureRandom`, GnuTLS's generator): it fills exactly
/// what it is given, and its draws differ.
@Suite("SecureRandom fills buffers from GnuTLS's generator")
struct SecureRandomTests {
    @Test func drawsDifferAndAreNotConstant() {
        let draws = (0..<64).map { _ in SecureRandom.bytes(20) }
        #expect(Set(draws).count == draws.count)
        #expect(draws.allSatisfy { $0.count == 20 })
        // 64 × 20 bytes: every byte value equal would be a broken generator.
        #expect(Set(draws.joined()).count > 100)
    }

    @Test func fillsExactlyTheBufferAndNothingAround() {
        var storage = [UInt8](repeating: 0xEE, count: 48)
        storage.withUnsafeMutableBytes { raw in
            SecureRandom.fill(UnsafeMutableRawBufferPointer(rebasing: raw[8..<40]))
        }
        #expect(storage[0..<8].allSatisfy { $0 == 0xEE })
        #expect(storage[40..<48].allSatisfy { $0 == 0xEE })
        #expect(storage[8..<40].contains { $0 != 0xEE })
    }

    @Test func emptyBufferIsANoOp() {
        SecureRandom.fill(UnsafeMutableRawBufferPointer(start: nil, count: 0))
        #expect(SecureRandom.bytes(0).isEmpty)
    }
}
