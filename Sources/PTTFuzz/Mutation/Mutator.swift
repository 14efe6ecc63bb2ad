/// Applies `Mutation`s. Every function is total: any input (empty included) gives an output, and the result
/// depends only on the input, the donor and the generator's state.
public enum Mutator {
    /// 1 to 4 random mutations stacked on `input`; splice donors come from `corpus`.
    public static func mutate(_ input: [UInt8], corpus: [[UInt8]], using random: inout FuzzRandom) -> [UInt8] {
        var output = input
        for _ in 0...random.below(4) {
            let mutation = Mutation.allCases[random.below(Mutation.allCases.count)]
            let donor = corpus.isEmpty ? [] : corpus[random.below(corpus.count)]
            output = apply(mutation, to: output, donor: donor, using: &random)
        }
        return output
    }

    /// Applies one `mutation` to `input`.
    public static func apply(
        _ mutation: Mutation, to input: [UInt8], donor: [UInt8],
        using random: inout FuzzRandom
    ) -> [UInt8] {
        var output = input
        switch mutation {
        case .flipBit:
            guard !output.isEmpty else { return random.bytes(1) }
            output[random.below(output.count)] ^= UInt8(1) << UInt8(random.below(8))
        case .setByte:
            guard !output.isEmpty else { return random.bytes(1) }
            output[random.below(output.count)] ^= UInt8(1 + random.below(255))
        case .truncate:
            guard !output.isEmpty else { return output }
            output.removeLast(1 + random.below(output.count))
        case .extend:
            output += random.bytes(1 + random.below(32))
        case .splice:
            let keep = random.below(output.count + 1)
            let from = random.below(donor.count + 1)
            output = Array(output.prefix(keep)) + donor[from...]
        case .interestingValue:
            let (width, value) = InterestingValues.fixedWidth[random.below(InterestingValues.fixedWidth.count)]
            overwrite(&output, with: InterestingValues.bigEndian(value, width: width), using: &random)
        case .varIntBoundary:
            overwrite(
                &output, with: InterestingValues.varInts[random.below(InterestingValues.varInts.count)],
                using: &random)
        case .duplicateRange:
            guard !output.isEmpty else { return output }
            let (start, end) = range(in: output.count, using: &random)
            output.insert(contentsOf: output[start..<end], at: end)
        case .removeRange:
            guard !output.isEmpty else { return output }
            let (start, end) = range(in: output.count, using: &random)
            output.removeSubrange(start..<end)
        }
        return output
    }

    /// Writes `bytes` at a random position, growing the input where they run past its end.
    static func overwrite(_ output: inout [UInt8], with bytes: [UInt8], using random: inout FuzzRandom) {
        let position = random.below(output.count + 1)
        for (offset, byte) in bytes.enumerated() {
            if position + offset < output.count { output[position + offset] = byte } else { output.append(byte) }
        }
    }

    /// A non-empty range of at most 64 bytes inside `count` (> 0) bytes.
    static func range(in count: Int, using random: inout FuzzRandom) -> (Int, Int) {
        let start = random.below(count)
        return (start, start + 1 + random.below(min(64, count - start)))
    }
}
