import PTTTransport
import TransportCore

/// The relay's messages to one phone on one stream, written in the order they were queued by one task (replies
/// and floor notices never overtake each other). Bounded: a phone that stops reading loses the oldest queued
/// messages once 256 wait (its stream's flow control holds the writer meanwhile).
final class StreamOutbox: Sendable {
    let connection: TransportConnection
    let stream: TransportStream
    private let queue: AsyncStream<[UInt8]>.Continuation

    init(_ stream: TransportStream) {
        self.stream = stream
        connection = stream.connection
        let (messages, queue) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingNewest(256))
        self.queue = queue
        Task {
            for await message in messages {
                do { try await stream.send(message) } catch { break }
            }
        }
    }

    deinit { queue.finish() }

    /// Queues `message`; never waits.
    func send(_ message: TalkGroupMessage) { queue.yield(message.encoded()) }

    /// Sends nothing more.
    func finish() { queue.finish() }
}
