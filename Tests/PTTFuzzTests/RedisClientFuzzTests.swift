import Testing
import TransportCore

@testable import PTTFuzz

/// A short seeded round of the Redis client against the hostile Redis (split, nested, huge, never-ending, invalid,
/// misdirected replies, silence, closes mid-reply), and of the RESP decoder in random pieces: no crash, no
/// finding (every claim answered once and in time, the loop responsive, the client's reply bytes bounded), and
/// both answers the client understood and refusals among the outcomes.
@Suite("Fuzzing the Redis client")
struct RedisClientFuzzTests {
    @Test func aSeededRoundOfHostilePlansFindsNothing() async {
        var random = FuzzRandom(seed: 31)
        let result = await RedisClientTarget.run(count: 60, random: &random)
        #expect(result.findings.isEmpty, "\(result.findings)")
        #expect(result.inputs == 60)
        #expect(result.crashes == 0)
        #expect(result.accepted > 0, "some plans answered like Redis: the client understood them")
        #expect(result.rejected > 0, "and hostile ones were refused, failing closed")
    }

    @Test func theDecoderInRandomPiecesNeverTraps() {
        var random = FuzzRandom(seed: 32)
        let result = RESPTarget.make().run(count: 5000, random: &random)
        #expect(result.inputs == 5000)
        #expect(result.accepted > 0 && result.rejected > 0)
    }

    /// The same seed gives the same plans (a finding can be replayed).
    @Test func plansAreReproducible() {
        var first = FuzzRandom(seed: 9)
        var second = FuzzRandom(seed: 9)
        for _ in 0..<50 {
            #expect(
                RedisClientTarget.plan(&first, nowMilliseconds: 1)
                    == RedisClientTarget.plan(&second, nowMilliseconds: 1))
        }
    }
}
