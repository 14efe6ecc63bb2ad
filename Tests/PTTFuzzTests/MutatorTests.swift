import Testing

@testable import PTTFuzz

@Suite struct MutatorTests {
    /// Random inputs of 0 to 40 bytes, the same on every run.
    static func inputs(_ count: Int = 300) -> [[UInt8]] {
        var random = FuzzRandom(seed: 1234)
        return (0..<count).map { _ in random.bytes(random.below(41)) }
    }

    func apply(_ mutation: Mutation, _ input: [UInt8], donor: [UInt8] = [9, 8, 7, 6, 5], seed: UInt64) -> [UInt8] {
        var random = FuzzRandom(seed: seed)
        return Mutator.apply(mutation, to: input, donor: donor, using: &random)
    }

    @Test func flipBitChangesExactlyOneBit() {
        for (index, input) in Self.inputs().enumerated() where !input.isEmpty {
            let output = apply(.flipBit, input, seed: UInt64(index))
            #expect(output.count == input.count)
            let bits = zip(input, output).reduce(0) { $0 + ($1.0 ^ $1.1).nonzeroBitCount }
            #expect(bits == 1)
        }
    }

    @Test func setByteChangesExactlyOneByte() {
        for (index, input) in Self.inputs().enumerated() where !input.isEmpty {
            let output = apply(.setByte, input, seed: UInt64(index))
            #expect(output.count == input.count)
            #expect(zip(input, output).filter { $0 != $1 }.count == 1)
        }
    }

    @Test func truncateKeepsAShorterPrefix() {
        for (index, input) in Self.inputs().enumerated() where !input.isEmpty {
            let output = apply(.truncate, input, seed: UInt64(index))
            #expect(output.count < input.count)
            #expect(Array(input.prefix(output.count)) == output)
        }
    }

    @Test func extendAppendsOneToThirtyTwoBytes() {
        for (index, input) in Self.inputs().enumerated() {
            let output = apply(.extend, input, seed: UInt64(index))
            #expect((1...32).contains(output.count - input.count))
            #expect(Array(output.prefix(input.count)) == input)
        }
    }

    @Test func spliceIsAPrefixOfTheInputThenASuffixOfTheDonor() {
        let donor: [UInt8] = Array(100..<130)
        for (index, input) in Self.inputs().enumerated() {
            let output = apply(.splice, input, donor: donor, seed: UInt64(index))
            let found = (0...min(input.count, output.count)).contains { keep in
                Array(output.prefix(keep)) == Array(input.prefix(keep))
                    && donor.count >= output.count - keep
                    && Array(donor.suffix(output.count - keep)) == Array(output.dropFirst(keep))
            }
            #expect(found)
        }
    }

    @Test func interestingValueWritesATableValueBigEndian() {
        for (index, input) in Self.inputs().enumerated() {
            let output = apply(.interestingValue, input, seed: UInt64(index))
            #expect(output.count >= input.count)
            let found = InterestingValues.fixedWidth.contains { width, value in
                let encoded = InterestingValues.bigEndian(value, width: width)
                return Self.isOverwrite(of: input, with: encoded, giving: output)
            }
            #expect(found)
        }
    }

    @Test func varIntBoundaryWritesABoundaryEncoding() {
        for (index, input) in Self.inputs().enumerated() {
            let output = apply(.varIntBoundary, input, seed: UInt64(index))
            let found = InterestingValues.varInts.contains { encoded in
                Self.isOverwrite(of: input, with: encoded, giving: output)
            }
            #expect(found)
        }
    }

    /// Whether `output` is `input` with `encoded` written over it at some position (extending it past its end).
    static func isOverwrite(of input: [UInt8], with encoded: [UInt8], giving output: [UInt8]) -> Bool {
        (0...input.count).contains { position in
            var expected = input
            for (offset, byte) in encoded.enumerated() {
                if position + offset < expected.count {
                    expected[position + offset] = byte
                } else {
                    expected.append(byte)
                }
            }
            return expected == output
        }
    }

    @Test func duplicateRangeRepeatsARangeRightAfterItself() {
        for (index, input) in Self.inputs().enumerated() where !input.isEmpty {
            let output = apply(.duplicateRange, input, seed: UInt64(index))
            let added = output.count - input.count
            #expect(added >= 1 && added <= 64)
            let found = (added...input.count).contains { end in
                Array(input[..<end]) + input[(end - added)..<end] + input[end...] == output
            }
            #expect(found)
        }
    }

    @Test func removeRangeDeletesOneContiguousRange() {
        for (index, input) in Self.inputs().enumerated() where !input.isEmpty {
            let output = apply(.removeRange, input, seed: UInt64(index))
            let removed = input.count - output.count
            #expect(removed >= 1)
            let found = (0...(input.count - removed)).contains { start in
                Array(input[..<start]) + input[(start + removed)...] == output
            }
            #expect(found)
        }
    }

    @Test func emptyInputsGiveDefinedResults() {
        #expect(apply(.flipBit, [], seed: 1).count == 1)
        #expect(apply(.setByte, [], seed: 1).count == 1)
        #expect(apply(.truncate, [], seed: 1).isEmpty)
        #expect(apply(.duplicateRange, [], seed: 1).isEmpty)
        #expect(apply(.removeRange, [], seed: 1).isEmpty)
        #expect(!apply(.extend, [], seed: 1).isEmpty)
        #expect(apply(.splice, [], donor: [], seed: 1).isEmpty)
        #expect(InterestingValues.varInts.contains(apply(.varIntBoundary, [], seed: 1)))
    }

    @Test func mutateIsDeterministicForASeed() {
        var first = FuzzRandom(seed: 5)
        var second = FuzzRandom(seed: 5)
        let corpus: [[UInt8]] = [Array(0..<50), Array(200..<255)]
        for input in Self.inputs(50) {
            #expect(
                Mutator.mutate(input, corpus: corpus, using: &first)
                    == Mutator.mutate(input, corpus: corpus, using: &second))
        }
    }
}
