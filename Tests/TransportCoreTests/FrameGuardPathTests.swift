import Testing

@testable import TransportCore

/// The frame guard's other two jobs on hand-built plaintexts (TLS messages in 1-RTT; what the path rules need), and
/// `PathChangeRules` on its own.
@Suite("Frame guard: TLS in 1-RTT and path records; path rules (sans-IO)")
struct FrameGuardPathTests {
    /// A CRYPTO frame (type 0x06) at `offset` holding `data`.
    static func crypto(_ offset: UInt64, _ data: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x06]
        VarInt.encode(offset, into: &frame)
        VarInt.encode(UInt64(data.count), into: &frame)
        return frame + data
    }

    static let keyUpdate: [UInt8] = [0x18, 0x00, 0x00, 0x01, 0x00]
    /// A NewSessionTicket handshake message with a `length`-byte body.
    static func ticket(_ length: Int) -> [UInt8] {
        [0x04, 0x00, UInt8(length >> 8), UInt8(length & 0xff)] + [UInt8](repeating: 0x5A, count: length)
    }

    @Test func aServerRefusesEveryCryptoFrameIn1RTT() {
        let server = FrameGuard(isClient: false)
        #expect(server.check(plaintext: Self.crypto(0, Self.keyUpdate)) == .refuse)
        #expect(server.refusal == .tlsMessageIn1RTT(type: 0x18))
        // Even one the client could not mean as KeyUpdate: a client has no post-handshake message in QUIC.
        let other = FrameGuard(isClient: false)
        #expect(other.check(plaintext: [0x01] + Self.crypto(7, [0x99])) == .refuse)
        // In a long-header packet (Initial, Handshake) CRYPTO is the handshake itself.
        let handshake = FrameGuard(isClient: false)
        #expect(handshake.check(plaintext: Self.crypto(0, Self.keyUpdate), shortHeader: false) == .pass)
    }

    @Test func aClientAcceptsSessionTicketsAndRefusesKeyUpdate() {
        let client = FrameGuard(isClient: true)
        let tickets = Self.ticket(40) + Self.ticket(3)
        #expect(client.check(plaintext: Self.crypto(0, Array(tickets.prefix(30)))) == .pass)
        #expect(client.check(plaintext: Self.crypto(30, Array(tickets.dropFirst(30)))) == .pass)
        #expect(client.check(plaintext: Self.crypto(0, Array(tickets.prefix(10)))) == .pass)  // a retransmission
        #expect(client.check(plaintext: Self.crypto(UInt64(tickets.count), Self.keyUpdate)) == .refuse)
        #expect(client.refusal == .tlsMessageIn1RTT(type: 0x18))
    }

    @Test func aClientReadsMessageHeadersSplitAcrossFrames() {
        let client = FrameGuard(isClient: true)
        let stream = Self.ticket(2) + Self.keyUpdate
        for (offset, byte) in stream.enumerated().prefix(6) {
            #expect(client.check(plaintext: Self.crypto(UInt64(offset), [byte])) == .pass, "byte \(offset)")
        }
        #expect(client.check(plaintext: Self.crypto(6, [stream[6]])) == .refuse)  // 0x18 starts the next message
    }

    @Test func aClientDropsCryptoPastAGapAndJudgesItWhenItComesInOrder() {
        let client = FrameGuard(isClient: true)
        let ticket = Self.ticket(8)
        #expect(client.check(plaintext: Self.crypto(4, Array(ticket.dropFirst(4)))) == .drop)
        #expect(client.packetsDropped == 1)
        // A packet that read some bytes in order and then hit a gap is dropped whole: its bytes are read again.
        #expect(client.check(plaintext: Self.crypto(0, Array(ticket.prefix(4))) + Self.crypto(20, [0x01])) == .drop)
        // Those first four bytes, sent again as a KeyUpdate header, are judged again, not skipped.
        #expect(client.check(plaintext: Self.crypto(0, Self.keyUpdate)) == .refuse)
    }

    @Test func undersizedChallengesAndTheirAnswersAreRecorded() {
        let server = FrameGuard(isClient: false)
        let small = [UInt8](repeating: 0x11, count: 8)
        let full = [UInt8](repeating: 0x22, count: 8)
        server.noteSent(plaintext: [0x1a] + small + [0x00, 0x00], packetSize: 300)
        server.noteSent(plaintext: [0x1a] + full + [UInt8](repeating: 0, count: 1100), packetSize: 1200)
        #expect(server.check(plaintext: [0x1b] + full) == .pass)
        #expect(!server.answeredUndersizedChallenge)
        #expect(server.check(plaintext: [0x01, 0x1b] + small) == .pass)
        #expect(server.answeredUndersizedChallenge)
        #expect(server.check(plaintext: [0x01]) == .pass)  // the record is per packet
        #expect(!server.answeredUndersizedChallenge)
        server.forgetChallenges()
        #expect(server.check(plaintext: [0x1b] + small) == .pass)
        #expect(!server.answeredUndersizedChallenge)
    }

    @Test func theSequenceNumbersSeenAreCounted() {
        let server = FrameGuard(isClient: false)
        #expect(server.sequenceNumbersSeen == 1)  // the handshake's connection ID
        for seq: UInt64 in 1...3 { #expect(server.admits(plaintext: FrameGuardTests.ncid(seq, retirePriorTo: 0))) }
        #expect(server.sequenceNumbersSeen == 4)
        #expect(server.admits(plaintext: FrameGuardTests.ncid(1000, retirePriorTo: 998)))
        #expect(server.sequenceNumbersSeen == 5)
        #expect(FrameGuard(isClient: true).sequenceNumbersSeen == 2)  // 0 and the preferred address's 1
    }

    static let ms: UInt64 = 1_000_000

    @Test func pathRulesHoldOffASecondPathChangeUntilTheValidationEnds() {
        var rules = PathChangeRules(initialRTT: 333 * Self.ms)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 0) == nil)
        rules.pathChanged(pto: 30 * Self.ms)
        #expect(rules.refusal(fromCurrentPath: true, sequenceNumbersSeen: 4, now: 1) == nil)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 1) == .validating)
        // Answered through an undersized challenge: ngtcp2 validates again, with a fallback.
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: true, pto: 30 * Self.ms, now: 2)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 3) == .validating)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: false, pto: 30 * Self.ms, now: 4)
        // Then ngtcp2 re-validates the old path, silently: held for max(9 PTO, PTO + 3 initial RTT) + slack.
        let end = 4 + (30 + 3 * 333) * Self.ms + PathChangeRules.revalidationSlack
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end - 1) == .revalidating)
        rules.observe(pto: 200 * Self.ms)  // a larger PTO lengthens it: 9 PTO is now the longer
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end + 1) == .revalidating)
        let longer = 4 + 9 * 200 * Self.ms + PathChangeRules.revalidationSlack
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: longer - 1) == .revalidating)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: longer) == nil)
        #expect(!rules.isTracking)
        rules.pathChanged(pto: 30 * Self.ms)
        rules.validationEnded(succeeded: false, answeredUndersizedChallenge: true, pto: 30 * Self.ms, now: longer)
        // A failure or an abort ends it at once: ngtcp2 falls back and re-validates nothing.
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: longer + 1) == nil)
        #expect(rules.refusedPackets == 5)
    }

    @Test func anotherPathMayMoveTheConnectionOnlyWhileTheValidationRunsAndNoPMTUD() {
        var rules = PathChangeRules(initialRTT: 333 * Self.ms)
        rules.pathChanged(pto: 30 * Self.ms)
        // A spoofed packet moved the connection, keeping the client's ID; the genuine client's next packet, naming
        // that ID, moves it back. One from the path left that may name another ID waits for the validation to end.
        #expect(rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 1) == nil)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 1) == .validating)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: true, pto: 30 * Self.ms, now: 2)
        // Validating again, PMTUD running: moving back to the fallback would assert in 0.12.1, and after a chain of
        // changes the fallback may be any path left before (the fifth long run's route), so nothing moves it, not
        // even a packet that keeps the peer's ID.
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 3) == .validating)
        #expect(
            rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 3)
                == .validating)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: false, pto: 30 * Self.ms, now: 4)
        // Re-validating the path left: to ngtcp2 that path is no longer a way back, so a packet from it that may name
        // an unused ID of the server's is a new path change taking a new ID of the peer's, and is held off like one
        // from anywhere else (the long fuzz run's abort: the re-validation's ID retired, then retired again).
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 5) == .revalidating)
        // One that surely keeps the peer's ID (a NAT rebinding back) still moves the connection.
        #expect(rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 5) == nil)
    }

    @Test func aPathChallengeSentHoldsOffChangesThatMayTakeANewIDUntilAnyValidationHasTimedOut() {
        // The callbacks may not tell of every validation (the long fuzz run found two such routes): every validation
        // sends a PATH_CHALLENGE when it starts and times out within 3 × max(PTO, initial PTO) of it.
        var rules = PathChangeRules(initialRTT: 100 * Self.ms)
        rules.challengeSent(pto: 30 * Self.ms, now: 1_000)
        let end = 1_000 + 3 * (30 + 300) * Self.ms + PathChangeRules.revalidationSlack
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end - 1) == .revalidating)
        #expect(
            rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: 2_000)
                == .revalidating)
        #expect(
            rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 2_000) == nil)
        #expect(rules.isTracking(at: end - 1))
        #expect(!rules.isTracking(at: end))
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end) == nil)
    }

    @Test func aSecondValidationWithoutItsCallbackEndsWithinTheBound() {
        // A packet answering a full-size and an undersized challenge at once reads as undersized; if ngtcp2 used the
        // full-size one, no second validation (and no callback) follows, only the silent re-validation.
        var rules = PathChangeRules(initialRTT: 333 * Self.ms)
        rules.pathChanged(pto: 30 * Self.ms)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: true, pto: 30 * Self.ms, now: 10)
        let end = 10 + (30 + 3 * 333) * Self.ms + PathChangeRules.revalidationSlack
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end - 1) == .validating)
        #expect(rules.isTracking(at: end - 1))
        #expect(!rules.isTracking(at: end))
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 4, now: end) == nil)
    }

    @Test func aChangeThatKeepsThePeersIDIsAdmittedOutsideASecondValidation() {
        // A NAT rebinding storm: every move names the same server ID from the same local address.
        var rules = PathChangeRules(initialRTT: 333 * Self.ms)
        rules.pathChanged(pto: 30 * Self.ms)
        #expect(rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 1) == nil)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: true, pto: 30 * Self.ms, now: 2)
        // While ngtcp2 validates again (PMTUD runs), no move at all: it waits until that validation ends.
        #expect(
            rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 3)
                == .validating)
        rules.validationEnded(succeeded: true, answeredUndersizedChallenge: false, pto: 30 * Self.ms, now: 4)
        #expect(rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 4, now: 5) == nil)
        // ... but not past the retirement budget.
        #expect(
            rules.refusal(fromCurrentPath: false, keepsConnectionID: true, sequenceNumbersSeen: 17, now: 5)
                == .retirementBudget)
    }

    @Test func pathRulesRefuseEveryPathChangeOnceTheRetirementBudgetIsGone() {
        var rules = PathChangeRules(initialRTT: 333 * Self.ms)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 16, now: 0) == nil)
        #expect(rules.refusal(fromCurrentPath: false, sequenceNumbersSeen: 17, now: 0) == .retirementBudget)
        #expect(rules.refusal(fromCurrentPath: true, sequenceNumbersSeen: 1_000, now: 0) == nil)
    }
}
