import ChildProcesses

/// How one input fared at the relay: answered as a healthy relay answers it (`accepted`), refused or ignored
/// (`rejected`), or never delivered (`undelivered`, with why: a finding, since the run then stops reaching the
/// code under test).
enum Delivery {
    case accepted
    case rejected
    case undelivered(String)
}

extension LiveContext {
    /// The loop every live target runs: `count` inputs made by `next`, each sent by `deliver` with a 64 KiB
    /// scratch buffer; a health check every `healthEvery` inputs and after the last (a failed one ends the
    /// target); wall and CPU time. Skipped when the relay died during an earlier target.
    func drive(
        _ name: String, count: Int, random: inout FuzzRandom, next: (inout FuzzRandom) -> [UInt8],
        deliver: ([UInt8], UnsafeMutableRawBufferPointer) -> Delivery
    ) async -> TargetResult {
        if let skipped = skippedBecauseDead(name) { return skipped }
        var result = TargetResult(name: name)
        let (wallStart, cpuStart) = (CPUTime.wall(), cpuMark())
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
        defer { buffer.deallocate() }
        var input: [UInt8] = []
        for index in 0..<count {
            input = next(&random)
            switch deliver(input, buffer) {
            case .accepted: result.count(accepted: true)
            case .rejected: result.count(accepted: false)
            case .undelivered(let why): result.findings.append("input \(index): \(why)")
            }
            if (index + 1) % healthEvery == 0 || index == count - 1 {
                guard await check(&result, lastInput: input) else { break }
            }
        }
        result.wallSeconds = CPUTime.wall() - wallStart
        result.cpuSeconds = cpuSeconds(since: cpuStart)
        return result
    }
}
