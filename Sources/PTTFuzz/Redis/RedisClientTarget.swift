import ChildProcesses
import Foundation
import TransportCore
import TransportIO

/// The relay's Redis client (the 0-RTT anti-replay store's `RedisAntiReplay` and its `RedisPipeline`, on an event
/// loop of its own) against a hostile Redis (`HostileRedis`) that answers each request by a seeded plan: replies
/// Redis really sends, mutated, split into pieces, nested deep, announced huge, streamed without end, garbage,
/// given to the wrong request or twice, silence, a close mid-reply.
///
/// Each input is one plan and a few claims. Invariants checked, each violation a finding: every claim is
/// answered, once, within its deadline and 5 s; the loop answers a job within 5 s (a loaded machine's
/// scheduling aside, a loop stuck reading a reply without end would not); the client never
/// holds more than one reply's bound plus one read of reply bytes. An input is "accepted" when a claim got an
/// answer the client understood as the script's, "rejected" otherwise (refused, failed closed).
enum RedisClientTarget {
    static let name = "redis-client"
    static let runID = "0123456789abcdef0123456789abcdef01234567"
    static let deadline: UInt64 = 30_000_000

    /// What Redis 7 sends to the client's commands (SCRIPT LOAD, the script, SELECT, errors).
    static func seeds(nowMilliseconds: Int64) -> [[UInt8]] {
        let marker = RESPValue.bulk(Array("memory \(nowMilliseconds) \(runID)".utf8))
        return [
            RESPValue.bulk(Array(RedisClaimScript.sha1.utf8)), .array([.integer(-1), marker]),
            .array([.integer(2), marker]), .array([.integer(1), marker]), .array([.integer(0), marker]),
            .simpleString("OK"), .error("NOSCRIPT No matching script. Please use EVAL."),
            .error("READONLY You can't write against a read only replica."),
            .error("OOM command not allowed when used memory > 'maxmemory'."),
            .error("LOADING Redis is loading the dataset in memory"), .error("MASTERDOWN Link with MASTER is down"),
            .bulk(nil), .integer(1), .array(nil), .array([]),
        ].map(\.encoded)
    }

    static func run(count: Int, random: inout FuzzRandom) async -> TargetResult {
        var result = TargetResult(name: name)
        let (wallStart, cpuStart) = (CPUTime.wall(), CPUTime.process())
        do {
            let server = try HostileRedis()
            defer { server.stop() }
            let loop = try EventLoop(name: "fuzz-redis-client")
            defer { loop.shutdown() }
            let shared = RedisAntiReplayShared(
                endpoint: RedisStoreEndpoint(
                    host: "127.0.0.1", port: server.port, database: 0, deadline: deadline, keyPrefix: "fuzz:",
                    clockSkewAllowance: 0),
                capacity: 1_000_000, windowSeconds: 3600, startupDeadline: 50_000_000)
            let client = try await loop.submit {
                UnsafeTransfer(RedisAntiReplay(shared: shared, loop: loop, retryDelays: 1_000_000...20_000_000))
            }
            for _ in 0..<count {
                let plan = Self.plan(&random, nowMilliseconds: RedisAntiReplayShared.wallClockMilliseconds())
                CrashWitness.record(target: name, input: Array(plan.flatMap(Self.bytes).prefix(CrashWitness.capacity)))
                let outcome = await exercise(client, shared: shared, loop: loop, server: server, plan: plan, &random)
                switch outcome {
                case .understood: result.count(accepted: true)
                case .refused: result.count(accepted: false)
                case .finding(let what):
                    result.count(accepted: false)
                    result.findings.append("\(what); plan: \(plan.map(Self.describe))")
                }
            }
            try await loop.submit { client.value.stop() }
        } catch {
            result.findings.append("the fuzzer could not run its hostile Redis: \(error)")
        }
        result.wallSeconds = CPUTime.wall() - wallStart
        result.cpuSeconds = CPUTime.process() - cpuStart
        return result
    }

    enum Outcome {
        case understood, refused
        case finding(String)
    }

    /// One plan: the client reconnects (so the plan starts with its greeting), then claims; the invariants.
    static func exercise(
        _ client: UnsafeTransfer<RedisAntiReplay>, shared: RedisAntiReplayShared, loop: EventLoop,
        server: HostileRedis, plan: [HostileRedis.Step], _ random: inout FuzzRandom
    ) async -> Outcome {
        server.setPlan(plan)
        guard (try? await loop.submit({ client.value.reconnect("next plan") })) != nil else {
            return .finding("the loop refused a job")
        }
        let clock = ContinuousClock()
        let ready = clock.now.advanced(by: .milliseconds(200))
        while clock.now < ready, (try? await loop.submit({ client.value.isConnected })) != true {
            try? await Task.sleep(for: .milliseconds(1))
        }
        try? await Task.sleep(for: .milliseconds(random.below(8)))  // the greeting's replies, or part of them
        let before = shared.snapshot
        let claims = 1 + random.below(4)
        let tickets = (0..<claims).map { _ in TicketDigest(digestBytes: random.bytes(16)) }
        let answers = Locked([Int](repeating: 0, count: claims))
        let claimed = Locked(false)
        let sent: Void? = try? await loop.submit {
            for (index, ticket) in tickets.enumerated() {
                if client.value.admit(ticket, recordingStart: Int64.max) == .ask {
                    client.value.claim(ticket) { accepted in
                        answers.withLock { $0[index] += 1 }
                        if accepted { claimed.withLock { $0 = true } }
                    }
                } else {
                    answers.withLock { $0[index] += 1 }
                }
            }
        }
        guard sent != nil else { return .finding("the loop refused a job") }
        let limit = clock.now.advanced(by: .nanoseconds(Int64(deadline)) + .seconds(5))
        while clock.now < limit, answers.withLock({ $0.contains(0) }) { try? await Task.sleep(for: .milliseconds(2)) }
        let counts = answers.withLock { $0 }
        if counts.contains(0) { return .finding("a claim was not answered within its deadline and 5 s") }
        if counts.contains(where: { $0 > 1 }) { return .finding("a claim was answered twice") }
        let pinged = clock.now
        guard (try? await loop.submit({})) != nil, clock.now - pinged < .seconds(5) else {
            return .finding("the loop took \(clock.now - pinged) to run a job")
        }
        let (peak, bound) =
            (try? await loop.submit { (client.value.peakBufferedReplyBytes, client.value.maxReplyBytes) })
            ?? (0, 0)
        if peak > bound + 16 * 1024 { return .finding("the client held \(peak) reply bytes (bound \(bound))") }
        let after = shared.snapshot
        let understood =
            claimed.withLock { $0 } || after.duplicates > before.duplicates || after.memoryLost > before.memoryLost
        return understood ? .understood : .refused
    }

    /// A plan: mostly a greeting a real Redis would answer (the script loaded, the marker read), then one step per
    /// claim, each a seed reply whole or in pieces, mutated, nested, huge, endless, garbage, silent or cut.
    static func plan(_ random: inout FuzzRandom, nowMilliseconds: Int64) -> [HostileRedis.Step] {
        let seeds = seeds(nowMilliseconds: nowMilliseconds)
        var steps: [HostileRedis.Step] = []
        steps.append(random.oneIn(4) ? step(seeds, &random) : .reply(seeds[0], pieces: 1 + random.below(3)))
        steps.append(random.oneIn(4) ? step(seeds, &random) : .reply(seeds[1], pieces: 1 + random.below(3)))
        for _ in 0..<(1 + random.below(6)) { steps.append(step(seeds, &random)) }
        return steps
    }

    static func step(_ seeds: [[UInt8]], _ random: inout FuzzRandom) -> HostileRedis.Step {
        let seed = seeds[random.below(seeds.count)]
        switch random.below(16) {
        case 0..<6:  // what the script answers a claim: claimed, claimed before, memory changed
            let claim = seeds[[1, 3, 4][random.below(3)]]
            return .reply(claim, pieces: random.oneIn(2) ? 1 : 1 + random.below(16))
        case 6, 7: return .reply(seed, pieces: 1 + random.below(min(seed.count, 64)))
        case 8, 9: return .reply(Mutator.mutate(seed, corpus: seeds, using: &random), pieces: 1 + random.below(4))
        case 10:
            let depth = 1 + random.below(12)
            return .reply(Array(String(repeating: "*1\r\n", count: depth).utf8) + seed, pieces: 1 + random.below(4))
        case 11:
            let huge = [Array("$1000000000\r\n".utf8), Array("*100000\r\n".utf8), Array("$4097\r\n".utf8)]
            return .reply(huge[random.below(huge.count)] + random.bytes(random.below(64)), pieces: 1)
        case 12:
            let endless = [Array("*1\r\n".utf8), Array(":1\r\n".utf8), Array("aaaaaaaa".utf8), random.bytes(64)]
            return .stream(endless[random.below(endless.count)])
        case 13: return .silence
        case 14: return .closeAfter(Array(seed.prefix(random.below(seed.count + 1))))
        case 15 where random.oneIn(2): return .reply(seed + seeds[random.below(seeds.count)], pieces: 1)  // two
        default: return .reply(random.bytes(1 + random.below(256)), pieces: 1 + random.below(4))
        }
    }

    static func bytes(_ step: HostileRedis.Step) -> [UInt8] {
        switch step {
        case .reply(let bytes, _), .closeAfter(let bytes), .stream(let bytes): bytes
        case .silence: []
        }
    }

    static func describe(_ step: HostileRedis.Step) -> String {
        switch step {
        case .reply(let bytes, let pieces): "reply \(Hex.string(Array(bytes.prefix(48)))) in \(pieces)"
        case .closeAfter(let bytes): "close after \(Hex.string(Array(bytes.prefix(48))))"
        case .stream(let bytes): "stream \(Hex.string(Array(bytes.prefix(16))))"
        case .silence: "silence"
        }
    }
}
