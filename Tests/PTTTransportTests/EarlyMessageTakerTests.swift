import Testing
import TransportCore
import TransportIO

@testable import PTTTransport

/// The inbox's offer to an early taker (a relay answering 0-RTT requests on the loop), without sockets: it sees
/// each message once it is whole, before any reader; what it leaves — and everything after — stays for the reader
/// in order; a split or garbled message is never handed over half.
@Suite("Stream inbox: early messages offered on the loop before any reader")
struct EarlyMessageTakerTests {
    /// A taker that takes messages whose first byte is `J` or `C` and records them, with the credit it was given.
    final class Recorder: Sendable {
        let taken = Locked<[[UInt8]]>([])
        let credit = Locked(0)
        var taker: EarlyMessageTaker {
            EarlyMessageTaker(
                maximumSize: 64,
                take: { message in
                    guard message.isEarly, [UInt8(ascii: "J"), UInt8(ascii: "C")].contains(message.bytes.first)
                    else { return false }
                    self.taken.withLock { $0.append(message.bytes) }
                    return true
                }, consumed: { bytes in self.credit.withLock { $0 += bytes } })
        }
    }

    @Test func theTakerTakesLeadingMessagesAndLeavesTheRestInOrder() async throws {
        let inbox = StreamInbox()
        let recorder = Recorder()
        let wire = [Array("Join".utf8), Array("Catch".utf8), Array("Release".utf8), Array("Join again".utf8)]
            .flatMap(MessageFraming.frame)
        inbox.receive(wire, fin: false, isEarly: true, offering: recorder.taker)
        #expect(recorder.taken.withLock { $0 } == [Array("Join".utf8), Array("Catch".utf8)])
        #expect(recorder.credit.withLock { $0 } == wire.count, "the whole chunk went into the decoder")
        // The reader gets the first message the taker left, then the one after it, in order.
        let first = try await inbox.nextMessage(maximumSize: 64, apply: { _ in })
        let second = try await inbox.nextMessage(maximumSize: 64, apply: { _ in })
        #expect(first?.bytes == Array("Release".utf8))
        #expect(first?.isEarly == true)
        #expect(second?.bytes == Array("Join again".utf8))
    }

    @Test func aMessageSplitAcrossArrivalsIsOfferedOnceWhole() async throws {
        let inbox = StreamInbox()
        let recorder = Recorder()
        let wire = MessageFraming.frame(Array("Join me".utf8)) + MessageFraming.frame(Array("Catch up".utf8))
        for byte in wire { inbox.receive([byte], fin: false, isEarly: true, offering: recorder.taker) }
        #expect(recorder.taken.withLock { $0 } == [Array("Join me".utf8), Array("Catch up".utf8)])
        #expect(recorder.credit.withLock { $0 } == wire.count)
    }

    @Test func garbageAndOversizedMessagesAreNeverTaken() async throws {
        let inbox = StreamInbox()
        let recorder = Recorder()
        // Not a message the taker wants, then a length prefix above the maximum: nothing is taken, and the reader
        // gets the first message and then the decoding error, as without a taker.
        inbox.receive(MessageFraming.frame([0xFF, 0x00, 0x13]), fin: false, isEarly: true, offering: recorder.taker)
        let oversized: [UInt8] = [0x40, 0xFF] + [UInt8](repeating: 0x4A, count: 80)
        inbox.receive(oversized, fin: false, isEarly: true, offering: recorder.taker)
        #expect(recorder.taken.withLock { $0 }.isEmpty)
        #expect(try await inbox.nextMessage(maximumSize: 64, apply: { _ in })?.bytes == [0xFF, 0x00, 0x13])
        await #expect(throws: TransportError.self) { try await inbox.nextMessage(maximumSize: 64, apply: { _ in }) }
    }

    @Test func bytesAfterTheEndAreNotOffered() async throws {
        let inbox = StreamInbox()
        let recorder = Recorder()
        inbox.end(.finished)
        inbox.receive(MessageFraming.frame(Array("Join".utf8)), fin: false, isEarly: true, offering: recorder.taker)
        #expect(recorder.taken.withLock { $0 }.isEmpty)
        #expect(try await inbox.nextMessage(maximumSize: 64, apply: { _ in }) == nil)
    }
}
