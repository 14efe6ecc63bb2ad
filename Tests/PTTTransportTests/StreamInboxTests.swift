import Testing
import TransportCore
import TransportIO

@testable import PTTTransport

/// The stream inbox on its own, without sockets: races between arriving bytes and cancelled readers, the
/// messages-then-bytes switch, credit accounting, and the errors that stick.
@Suite("Stream inbox: one buffer and decoder, cancellation-safe waits")
struct StreamInboxTests {
    /// Sums the credit the inbox hands back and counts stop requests.
    final class Ledger: Sendable {
        private let totals = Locked((consumed: 0, stops: 0))
        var consumed: Int { totals.withLock { $0.consumed } }
        var stops: Int { totals.withLock { $0.stops } }
        func apply(_ effects: StreamInbox.Effects) {
            totals.withLock {
                $0.consumed += effects.consumed
                $0.stops += effects.stopSending ? 1 : 0
            }
        }
    }

    @Test func readersCancelledAtRandomLoseAndDuplicateNothing() async throws {
        let inbox = StreamInbox()
        let ledger = Ledger()
        let count = 400
        let sent = (0..<count).map { "message \($0)" }
        let wire = sent.map { MessageFraming.frame(Array($0.utf8)) }
        let producer = Task.detached {
            for (index, frame) in wire.enumerated() {
                inbox.receive(frame, fin: index == count - 1, isEarly: false)
                if index % 7 == 0 { await Task.yield() }
            }
        }
        let received = await withTaskGroup(of: [String].self) { group in
            for reader in 0..<4 {
                group.addTask {
                    var mine: [String] = []
                    var round = 0
                    while true {
                        round += 1
                        let attempt = Task { try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply) }
                        if (round + reader) % 3 == 0 { attempt.cancel() }
                        switch await attempt.result {
                        case .success(let message?): mine.append(String(decoding: message.bytes, as: UTF8.self))
                        case .success(nil): return mine
                        case .failure(let error): #expect(error is CancellationError)
                        }
                    }
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        await producer.value
        #expect(received.sorted() == sent.sorted())
        #expect(ledger.consumed == wire.reduce(0) { $0 + $1.count })
    }

    @Test func aCancelledWaitLeavesTheNextMessageForTheNextRead() async throws {
        let inbox = StreamInbox()
        let ledger = Ledger()
        let waiting = Task { try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply) }
        await Task.yield()
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        inbox.receive(MessageFraming.frame([1]) + MessageFraming.frame([2]), fin: true, isEarly: false)
        #expect(try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply)?.bytes == [1])
        #expect(try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply)?.bytes == [2])
        #expect(try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply) == nil)
        #expect(try await inbox.nextChunk(apply: ledger.apply) == nil)
    }

    @Test func bytesAfterMessagesStartWhereTheMessagesStopped() async throws {
        let inbox = StreamInbox()
        let ledger = Ledger()
        let wire = MessageFraming.frame([1, 1]) + MessageFraming.frame([2, 2]) + [9, 9, 9]
        inbox.receive(wire, fin: false, isEarly: true)
        let first = try await inbox.nextMessage(maximumSize: 1024, apply: ledger.apply)
        #expect(first == Message(bytes: [1, 1], isEarly: true))
        // The second message was already decoded: it comes back framed, followed by the raw bytes.
        let chunk = try await inbox.nextChunk(apply: ledger.apply)
        #expect(chunk?.bytes == MessageFraming.frame([2, 2]) + [9, 9, 9])
        #expect(chunk?.isEarly == true)
        inbox.receive([8], fin: true, isEarly: false)
        #expect(try await inbox.nextChunk(apply: ledger.apply)?.bytes == [8])
        #expect(try await inbox.nextChunk(apply: ledger.apply) == nil)
        #expect(ledger.consumed == wire.count + 1)
    }

    @Test func decodingErrorsStopTheStreamAndRepeat() async throws {
        let tooLarge = StreamInbox()
        let ledger = Ledger()
        tooLarge.receive(MessageFraming.frame([UInt8](repeating: 0, count: 100)), fin: false, isEarly: false)
        for _ in 0..<2 {
            await #expect { _ = try await tooLarge.nextMessage(maximumSize: 10, apply: ledger.apply) } throws: {
                ($0 as? TransportError)?.code == .messageTooLarge
            }
        }
        #expect(ledger.stops == 1)

        let truncated = StreamInbox()
        truncated.receive([5, 1, 2], fin: true, isEarly: false)
        for _ in 0..<2 {
            await #expect { _ = try await truncated.nextMessage(maximumSize: 10, apply: ledger.apply) } throws: {
                ($0 as? TransportError)?.code == .messageTruncated
            }
        }
    }

    @Test func bufferedMessagesComeBeforeTheEndingError() async throws {
        let inbox = StreamInbox()
        let ledger = Ledger()
        inbox.receive(MessageFraming.frame([7]), fin: false, isEarly: false)
        inbox.end(.failed(TransportError(.streamReset, "reset", applicationErrorCode: 3)))
        inbox.receive(MessageFraming.frame([8]), fin: false, isEarly: false)  // after the end: ignored
        #expect(try await inbox.nextMessage(maximumSize: 10, apply: ledger.apply)?.bytes == [7])
        await #expect { _ = try await inbox.nextMessage(maximumSize: 10, apply: ledger.apply) } throws: {
            ($0 as? TransportError)?.applicationErrorCode == 3
        }
    }

    /// One byte per STREAM frame (issue 21, item 11): the bytes join the last small chunk instead of each
    /// becoming a buffered allocation; chunks stay near `coalescingLimit` bytes; 0-RTT bytes stay apart.
    @Test func oneByteArrivalsAreJoinedIntoFewChunks() async throws {
        let inbox = StreamInbox()
        let ledger = Ledger()
        let count = 100_000
        for index in 0..<count { inbox.receive([UInt8(index % 256)], fin: false, isEarly: index < 10) }
        inbox.receive([], fin: true, isEarly: false)
        let expected = 2 + (count - 10 - 1) / StreamInbox.coalescingLimit
        #expect(inbox.bufferedChunks == expected, "\(inbox.bufferedChunks) chunks for \(count) one-byte arrivals")
        var received: [UInt8] = []
        var earlyBytes = 0
        while let chunk = try await inbox.nextChunk(apply: ledger.apply) {
            received += chunk.bytes
            if chunk.isEarly { earlyBytes += chunk.bytes.count }
        }
        #expect(received == (0..<count).map { UInt8($0 % 256) })
        #expect(earlyBytes == 10)
        #expect(ledger.consumed == count)
    }
}
