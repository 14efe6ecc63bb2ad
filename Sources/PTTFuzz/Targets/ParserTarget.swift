import ChildProcesses
import TransportCore

/// An in-process parser the fuzzer feeds: its seeds (valid encodings) and how one input is fed to it.
struct ParserTarget: Sendable {
    /// The name in the report.
    let name: String
    /// Valid inputs mutations start from.
    let seeds: [[UInt8]]
    /// Relative share of the parser budget.
    let weight: Int
    /// Feeds one input; the generator picks incidental choices (split points, chunk sizes).
    let feed: @Sendable ([UInt8], inout FuzzRandom) -> ProbeOutcome

    /// A target named `name` with `seeds`, taking `weight` shares of the parser budget.
    init(
        name: String, seeds: [[UInt8]], weight: Int = 1,
        feed: @escaping @Sendable ([UInt8], inout FuzzRandom) -> ProbeOutcome
    ) {
        self.name = name
        self.seeds = seeds
        self.weight = weight
        self.feed = feed
    }

    /// A target for a decoder whose accepted values must read back: `decode` parses the input, and the value it
    /// gives, encoded again by `encode`, must decode to the same value (else the input is reported as rejected with
    /// what did not read back).
    static func roundTrip<Value: Equatable & SendableMetatype>(
        name: String, seeds: [[UInt8]], weight: Int = 1,
        decode: @escaping @Sendable ([UInt8]) throws(TransportError) -> Value,
        encode: @escaping @Sendable (Value) -> [UInt8]
    ) -> ParserTarget {
        ParserTarget(name: name, seeds: seeds, weight: weight) { input, _ in
            do throws(TransportError) {
                let value = try decode(input)
                return try decode(encode(value)) == value ? .accepted : .rejected("\(value) does not read back")
            } catch {
                return .rejected(error.description)
            }
        }
    }

    /// Feeds `count` inputs: one in ten is random bytes, the others mutate a seed or an earlier accepted mutant
    /// (up to 64 are kept). Returns the counts, the thread's CPU time and the wall time.
    func run(count: Int, random: inout FuzzRandom) -> TargetResult {
        var result = TargetResult(name: name)
        var corpus = seeds
        var kept = 0
        let (wallStart, cpuStart) = (CPUTime.wall(), CPUTime.thread())
        for _ in 0..<count {
            let input: [UInt8]
            if corpus.isEmpty || random.oneIn(10) {
                input = random.bytes(random.below(random.oneIn(4) ? 512 : 48))
            } else {
                input = Mutator.mutate(corpus[random.below(corpus.count)], corpus: corpus, using: &random)
            }
            CrashWitness.record(target: name, input: input)
            let outcome = feed(input, &random)
            result.count(accepted: outcome == .accepted)
            if outcome == .accepted && input.count <= 4096 {
                if kept < 64 { corpus.append(input) } else { corpus[seeds.count + kept % 64] = input }
                kept += 1
            }
        }
        result.wallSeconds = CPUTime.wall() - wallStart
        result.cpuSeconds = CPUTime.thread() - cpuStart
        return result
    }
}
