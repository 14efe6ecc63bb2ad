import Testing
@testable import PTTFuzz

@Suite struct FuzzRandomTests {
    @Test func sameSeedSameSequence() {
        var first = FuzzRandom(seed: 42), second = FuzzRandom(seed: 42)
        let a = (0..<100).map { _ in first.next() }
        let b = (0..<100).map { _ in second.next() }
        #expect(a == b)
    }
}
