import Testing

@testable import TransportCore

extension FrameGuard {
    /// Whether the guard lets ngtcp2 process this payload (a long-header packet unless `shortHeader`).
    func admits(plaintext: [UInt8], shortHeader: Bool = false) -> Bool {
        check(plaintext: plaintext, shortHeader: shortHeader) == .pass
    }

    /// The sequence number a refused NEW_CONNECTION_ID tried to retire again.
    var refusedSequence: UInt64? {
        if case .retiresAgain(let sequence) = refusal { return sequence }
        return nil
    }
}

/// The frame guard's NEW_CONNECTION_ID rule on hand-built plaintexts: what it refuses (every way to make ngtcp2
/// 0.12.1 retire a sequence number twice), what it lets through (legitimate rotation, reordering), and that it reads
/// frames exactly as ngtcp2 does (an NCID ngtcp2 would never reach is not judged; one it would reach always is).
@Suite("Frame guard: NEW_CONNECTION_ID (sans-IO)")
struct FrameGuardTests {
    /// A NEW_CONNECTION_ID frame (type 0x18) with an 8-byte connection ID derived from `seq`.
    static func ncid(_ seq: UInt64, retirePriorTo: UInt64, cidByte: UInt8? = nil) -> [UInt8] {
        var frame: [UInt8] = [0x18]
        VarInt.encode(seq, into: &frame)
        VarInt.encode(retirePriorTo, into: &frame)
        frame.append(8)
        frame += [UInt8](repeating: cidByte ?? UInt8(truncatingIfNeeded: seq &+ 1), count: 8)
        frame += [UInt8](repeating: 0xAB, count: 16)  // stateless reset token
        return frame
    }

    static let ping: [UInt8] = [0x01]

    @Test func benignRotationIsAdmitted() {
        let guarded = FrameGuard(isClient: false)
        // What aioquic and ngtcp2 clients send: fresh sequence numbers, retire_prior_to rising behind them.
        #expect(guarded.admits(plaintext: Self.ncid(1, retirePriorTo: 0) + Self.ncid(2, retirePriorTo: 0)))
        #expect(guarded.admits(plaintext: Self.ncid(3, retirePriorTo: 1)))
        #expect(guarded.admits(plaintext: Self.ncid(4, retirePriorTo: 3) + Self.ping))
        #expect(guarded.retirePriorTo == 3)
        #expect(guarded.refusedSequence == nil)
    }

    @Test func retransmissionAboveRetirePriorToIsAdmitted() {
        let guarded = FrameGuard(isClient: false)
        let frame = Self.ncid(5, retirePriorTo: 2)
        #expect(guarded.admits(plaintext: frame))
        #expect(guarded.admits(plaintext: frame))  // a repeat ngtcp2 deduplicates itself (seq >= retire_prior_to)
    }

    @Test func onePacketDoubleRetirementIsRefused() {
        let guarded = FrameGuard(isClient: false)
        let repeated = Self.ncid(5, retirePriorTo: 0)
        #expect(!guarded.admits(plaintext: Self.ncid(20, retirePriorTo: 20) + repeated + repeated))
        #expect(guarded.refusedSequence == 5)
    }

    @Test func twoPacketRetirementOfTheHandshakeIDIsRefused() {
        let guarded = FrameGuard(isClient: false)
        #expect(guarded.admits(plaintext: Self.ncid(20, retirePriorTo: 20)))  // ngtcp2 retires sequence 0 here
        #expect(!guarded.admits(plaintext: Self.ncid(0, retirePriorTo: 0, cidByte: 0x77)))
        #expect(guarded.refusedSequence == 0)
    }

    @Test func retiringAnAddedIDAgainIsRefused() {
        let guarded = FrameGuard(isClient: false)
        #expect(guarded.admits(plaintext: Self.ncid(3, retirePriorTo: 0)))  // ngtcp2 holds sequence 3
        #expect(guarded.admits(plaintext: Self.ncid(9, retirePriorTo: 9)))  // ... and retires it here
        #expect(!guarded.admits(plaintext: Self.ncid(3, retirePriorTo: 0)))  // a second retirement of 3
    }

    @Test func reorderedFirstSightingBelowRetirePriorToIsAdmitted() {
        // Sent as NCID(4, 0) then NCID(6, 5); delivered in the other order. ngtcp2 retires 4 once: safe.
        let guarded = FrameGuard(isClient: false)
        #expect(guarded.admits(plaintext: Self.ncid(6, retirePriorTo: 5)))
        #expect(guarded.admits(plaintext: Self.ncid(4, retirePriorTo: 0)))
        #expect(!guarded.admits(plaintext: Self.ncid(4, retirePriorTo: 0)))  // ... but only once
    }

    @Test func clientCountsThePreferredAddressSequenceAsSeen() {
        let client = FrameGuard(isClient: true)
        client.handshakeConfirmed()  // retirements are refused outright before (see below)
        #expect(client.admits(plaintext: Self.ncid(10, retirePriorTo: 10)))
        #expect(!client.admits(plaintext: Self.ncid(1, retirePriorTo: 0)))
        let server = FrameGuard(isClient: false)
        #expect(server.admits(plaintext: Self.ncid(10, retirePriorTo: 10)))
        #expect(server.admits(plaintext: Self.ncid(1, retirePriorTo: 0)))
    }

    @Test func framesAfterAnUnparsableFrameAreNotJudged() {
        // ngtcp2 stops at the unknown type 0x40 (no STREAM bit) and closes: it never reaches the NCIDs after it.
        let guarded = FrameGuard(isClient: false)
        let repeated = Self.ncid(5, retirePriorTo: 0)
        #expect(guarded.admits(plaintext: Self.ncid(20, retirePriorTo: 20) + [0x40] + repeated + repeated))
        // A truncated NCID likewise ends parsing.
        #expect(guarded.admits(plaintext: Array(Self.ncid(5, retirePriorTo: 0).prefix(10))))
    }

    @Test func unknownTypesWithTheStreamBitParseAsStreamFrames() {
        let guarded = FrameGuard(isClient: false)
        let attack = Self.ncid(20, retirePriorTo: 20) + Self.ncid(5, retirePriorTo: 0)
        // 0x28 has the STREAM bit and no LEN bit: 0.12.1 takes the rest of the packet as its data.
        #expect(guarded.admits(plaintext: [0x28, 0x00] + attack + Self.ncid(5, retirePriorTo: 0)))
        // 0x2a has the LEN bit: 0.12.1 reads a length, skips 3 bytes, then parses the NCIDs that follow.
        let second = FrameGuard(isClient: false)
        #expect(!second.admits(plaintext: [0x2a, 0x00, 0x03, 1, 2, 3] + attack + Self.ncid(5, retirePriorTo: 0)))
    }

    @Test func everyFrameTypeIsSkippedByItsLength() {
        // One of each frame type ngtcp2 0.12.1 decodes, then the attack: the guard must reach the NCIDs.
        var frames: [UInt8] = [0x00, 0x00, 0x01]  // PADDING, PING
        frames += [0x02, 0x05, 0x00, 0x01, 0x00, 0x01, 0x00]  // ACK: 1 extra range
        frames += [0x03, 0x05, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03]  // ACK_ECN
        frames += [0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00]  // RESET_STREAM, STOP_SENDING
        frames += [0x06, 0x00, 0x02, 0xAA, 0xBB, 0x07, 0x01, 0xCC]  // CRYPTO, NEW_TOKEN
        frames += [0x0e, 0x04, 0x40, 0x10, 0x02, 0xAA, 0xBB]  // STREAM with OFF and LEN bits
        frames += [
            0x10, 0x01, 0x11, 0x00, 0x01, 0x12, 0x01, 0x13, 0x01, 0x14, 0x01, 0x15, 0x00, 0x01, 0x16, 0x01,
            0x17, 0x01, 0x19, 0x00,
        ]  // flow control, RETIRE_CONNECTION_ID
        frames += [0x1a] + [UInt8](repeating: 1, count: 8) + [0x1b] + [UInt8](repeating: 2, count: 8)
        frames += [0x1c, 0x00, 0x00, 0x01, 0x41, 0x1d, 0x00, 0x00, 0x1e]  // CONNECTION_CLOSE x2, HANDSHAKE_DONE
        frames += [0x31, 0x02, 0xDE, 0xAD]  // DATAGRAM with length
        let repeated = Self.ncid(5, retirePriorTo: 0)
        let guarded = FrameGuard(isClient: false)
        #expect(!guarded.admits(plaintext: frames + Self.ncid(20, retirePriorTo: 20) + repeated + repeated))
        #expect(guarded.refusedSequence == 5)
    }

    @Test func retirePriorToAboveSequenceIsNotCounted() {
        // ngtcp2 closes with FRAME_ENCODING_ERROR on such a frame, before using it.
        let guarded = FrameGuard(isClient: false)
        #expect(guarded.admits(plaintext: Self.ncid(2, retirePriorTo: 9)))
        #expect(guarded.retirePriorTo == 0)
    }

    @Test func memoryStaysBoundedAndNeverForgets() {
        let guarded = FrameGuard(isClient: false)
        // 40 scattered sequence numbers: more ranges than the guard keeps, so it merges gaps (counts them seen).
        for seq in stride(from: 2, through: 80, by: 2) {
            #expect(guarded.admits(plaintext: Self.ncid(UInt64(seq), retirePriorTo: 0)))
        }
        #expect(guarded.admits(plaintext: Self.ncid(100, retirePriorTo: 100)))
        for seq in stride(from: 2, through: 80, by: 2) {
            #expect(!guarded.admits(plaintext: Self.ncid(UInt64(seq), retirePriorTo: 0)), "sequence \(seq)")
        }
    }

    @Test func aClientRefusesRetirementsUntilTheHandshakeIsConfirmed() {
        // Upstream bf5a8812 (1.22.0): a 0.5-RTT retire_prior_to makes a client's ngtcp2 assert when it writes its
        // last Handshake flight. HANDSHAKE_DONE shows the server read that flight.
        let client = FrameGuard(isClient: true)
        #expect(client.admits(plaintext: Self.ncid(2, retirePriorTo: 0), shortHeader: true), "a spare ID is fine")
        #expect(!client.admits(plaintext: Self.ping + Self.ncid(3, retirePriorTo: 1), shortHeader: true))
        #expect(client.refusal == .retiresBeforeConfirmation(retirePriorTo: 1))
        let confirmed = FrameGuard(isClient: true)
        confirmed.handshakeConfirmed()
        #expect(confirmed.admits(plaintext: Self.ncid(3, retirePriorTo: 1), shortHeader: true))
        #expect(confirmed.refusal == nil)
    }

    @Test func theEarlyRetirementRuleIsTheClientsAndOnlyWhereTheLibraryNeedsIt() {
        let server = FrameGuard(isClient: false)
        #expect(server.admits(plaintext: Self.ncid(3, retirePriorTo: 1), shortHeader: true))
        let fixedLibrary = FrameGuard(isClient: true, awaitsConfirmation: false)
        #expect(fixedLibrary.admits(plaintext: Self.ncid(3, retirePriorTo: 1), shortHeader: true))
        // And the repeated-retirement rule, off where ngtcp2 (1.4.0 and later) skips a number it retired.
        let skipping = FrameGuard(isClient: false, checksRetirements: false)
        let repeated = Self.ncid(5, retirePriorTo: 0)
        #expect(skipping.admits(plaintext: Self.ncid(20, retirePriorTo: 20) + repeated + repeated))
    }
}
