import PTTTransport
import TransportCore

/// The relay's messages to one phone on one stream, written in the order they were queued by one task (replies
/// and floor notices never overtake each other). Bounded: a phone that stops reading loses the oldest queued
/// messages once 256 wait (its stream's flow control holds the writer meanwhile).
final class StreamOutbox: Sendable {
    let connection: TransportConnection
    let stream: TransportStream
    private let queue: AsyncStream<[UInt8]>.Continuation
    /// The user a phone of protocol revision 1 joined as on this connection (nil: a later revision, or no join
    /// yet): such a phone requires a holder in `floor denied`, and reads its own name there.
    private let firstRevisionUser: Locked<MemberIdentity?>

    init(_ stream: TransportStream, firstRevisionUser: Locked<MemberIdentity?> = Locked(nil)) {
        self.stream = stream
        self.firstRevisionUser = firstRevisionUser
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
    func send(_ message: TalkGroupMessage) {
        if case .floorDenied(let group, nil, let cause) = message, let user = firstRevisionUser.withLock({ $0 }) {
            queue.yield(TalkGroupMessage.floorDenied(group: group, holder: user, cause: cause).encoded())
        } else {
            queue.yield(message.encoded())
        }
    }

    /// The connection joined with `join`: later messages are written in the form its revision reads.
    func joined(_ join: TalkGroupMessage.JoinRequest) {
        firstRevisionUser.withLock { $0 = join.revision < 2 ? join.user : nil }
    }

    /// Sends nothing more.
    func finish() { queue.finish() }
}
