import PTTTransport
import Testing

@testable import PTTTalkGroups

/// The burst buffer on a virtual clock: frames in sequence order, no repeats, bounded by duration and bytes, kept
/// for a while after the burst, and every refused catch-up typed (sans-IO, no wall clock).
@Suite("Burst buffer (sans-IO)")
struct BurstBufferTests {
    static let ms: UInt64 = 1_000_000
    static let talker = try! MemberIdentity("talker")

    static func policy(
        duration: UInt64 = 30_000 * ms, bytes: Int = 1 << 20, retain: UInt64 = 15_000 * ms
    )
        -> BurstBuffer.Policy
    {
        BurstBuffer.Policy(maximumDuration: duration, maximumBytes: bytes, retainAfterEnd: retain)
    }

    static func frame(_ burst: UInt64, _ sequence: UInt32) -> (AudioFrameHeader, [UInt8]) {
        let header = AudioFrameHeader(burst: burst, sequence: sequence, captureMilliseconds: sequence * 20)
        return (header, header.frame([UInt8](repeating: UInt8(truncatingIfNeeded: sequence), count: 60)))
    }

    /// Appends frames `range` of `burst`, 20 ms apart from `start`.
    static func fill(_ buffer: inout BurstBuffer, _ burst: UInt64, _ range: Range<UInt32>, start: UInt64 = 0) {
        for sequence in range {
            let (header, bytes) = frame(burst, sequence)
            let stored = buffer.append(header, bytes, now: start + UInt64(sequence) * 20 * ms)
            #expect(stored == .stored)
        }
    }

    static func sequences(_ frames: [[UInt8]]) -> [UInt32] {
        frames.map { try! AudioFrameHeader(parsing: $0).sequence }
    }

    @Test func framesComeBackInOrderFromAnySequence() throws {
        var buffer = BurstBuffer(policy: Self.policy())
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<50)
        let all = buffer.frames(burst: 7, from: 0, limit: 100)
        #expect(Self.sequences(all.frames) == Array(0..<50))
        #expect(all.next == 50)
        let tail = buffer.frames(burst: 7, from: 45, limit: 3)
        #expect(Self.sequences(tail.frames) == [45, 46, 47])
        #expect(tail.next == 48)
        #expect(try buffer.catchUp(burst: 7, from: 0, now: 1_000 * Self.ms).from == 0)
        #expect(try buffer.catchUp(burst: 0, from: 10, now: 1_000 * Self.ms).burst.id == 7, "0: the current burst")
    }

    @Test func aLateFrameIsPutInPlaceAndARepeatIsDropped() {
        var buffer = BurstBuffer(policy: Self.policy())
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<3)
        let (h5, b5) = Self.frame(7, 5)
        let result1 = buffer.append(h5, b5, now: 100 * Self.ms)
        #expect(result1 == .stored)
        let (h4, b4) = Self.frame(7, 4)
        let result2 = buffer.append(h4, b4, now: 101 * Self.ms)
        #expect(result2 == .stored, "reordered on the way: put in place")
        let result3 = buffer.append(h4, b4, now: 102 * Self.ms)
        #expect(result3 == .duplicate)
        let result4 = buffer.append(h5, b5, now: 103 * Self.ms)
        #expect(result4 == .duplicate)
        #expect(Self.sequences(buffer.frames(burst: 7, from: 0, limit: 10).frames) == [0, 1, 2, 4, 5])
    }

    @Test func framesOfAnotherBurstOrAfterTheEndAreRefused() {
        var buffer = BurstBuffer(policy: Self.policy())
        let (header, bytes) = Self.frame(7, 0)
        let result5 = buffer.append(header, bytes, now: 0)
        #expect(result5 == .wrongBurst, "no burst yet")
        buffer.start(id: 8, talker: Self.talker, now: 0)
        let result6 = buffer.append(header, bytes, now: 0)
        #expect(result6 == .wrongBurst)
        buffer.end(now: 10)
        let (late, lateBytes) = Self.frame(8, 0)
        let result7 = buffer.append(late, lateBytes, now: 20)
        #expect(result7 == .wrongBurst)
    }

    @Test func theDurationBoundDropsTheOldestFrames() throws {
        var buffer = BurstBuffer(policy: Self.policy(duration: 1_000 * Self.ms))
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<100)  // 2 s of frames: the first second ages out
        #expect(buffer.count == 51)
        #expect(buffer.evicted == 49)
        #expect(buffer.burst?.oldestHeld == 49)
        // A catch-up from the start begins at the oldest frame held.
        #expect(try buffer.catchUp(burst: 7, from: 0, now: 2_000 * Self.ms).from == 49)
    }

    @Test func theByteBoundHolds() {
        let limit = 10 * (AudioFrameHeader.size + 60 + BurstBuffer.frameOverhead)
        var buffer = BurstBuffer(policy: Self.policy(bytes: limit))
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<40)
        #expect(buffer.bytes <= limit)
        #expect(buffer.count == 10)
        #expect(Self.sequences(buffer.frames(burst: 7, from: 0, limit: 100).frames) == Array(30..<40))
    }

    @Test func anEndedBurstIsKeptForItsRetentionThenAgesOut() throws {
        var buffer = BurstBuffer(policy: Self.policy(retain: 5_000 * Self.ms))
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<10)
        buffer.end(now: 1_000 * Self.ms)
        #expect(try buffer.catchUp(burst: 7, from: 0, now: 5_999 * Self.ms).burst.ended == 1_000 * Self.ms)
        let recheck = buffer.expire(now: 5_999 * Self.ms)
        #expect(recheck == 6_000 * Self.ms)
        do {
            _ = try buffer.catchUp(burst: 7, from: 0, now: 6_000 * Self.ms)
            Issue.record("an aged-out burst was served")
        } catch {
            #expect(error.code == .burstUnavailable)
        }
        let done = buffer.expire(now: 6_000 * Self.ms)
        #expect(done == nil)
        #expect(buffer.burst == nil && buffer.count == 0 && buffer.bytes == 0, "its memory is freed")
    }

    @Test func refusedCatchUpsAreTyped() {
        var buffer = BurstBuffer(policy: Self.policy())
        func code(_ burst: UInt64, _ from: UInt32) -> TransportError.Code? {
            do {
                _ = try buffer.catchUp(burst: burst, from: from, now: 0)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(0, 0) == .burstUnavailable, "nothing held")
        buffer.start(id: 7, talker: Self.talker, now: 0)
        Self.fill(&buffer, 7, 0..<5)
        #expect(code(8, 0) == .burstUnavailable, "another burst")
        #expect(code(7, 6) == .sequenceInFuture)
        #expect(code(7, 5) == nil, "from the next frame: live")
        buffer.start(id: 9, talker: Self.talker, now: 0)
        #expect(code(7, 0) == .burstUnavailable, "replaced by a newer burst")
    }

    @Test func aThousandGroupsOfThirtySecondsStayWithinTheDocumentedBound() {
        // 30 s of 24 kbit/s Opus (60-byte frames, 78 with the header) in each of 1,000 groups.
        let policy = BurstBufferPolicy()
        var total = 0
        var buffer = BurstBuffer(policy: policy.bounds)
        buffer.start(id: 1, talker: Self.talker, now: 0)
        Self.fill(&buffer, 1, 0..<1500)
        #expect(buffer.count == 1500, "30 s fit in the default bound")
        total = buffer.bytes * 1_000
        #expect(total <= 1_000 * policy.maximumBytes)
        #expect(total / (1 << 20) <= 203, "\(total / (1 << 20)) MiB for 1,000 groups")
    }
}
