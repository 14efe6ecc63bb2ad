import TransportCore
import TransportIO

/// The relay's pushes to a link (see `TransportLink.notices`): every message on every stream the relay opens, from
/// each connection the link makes in turn. Every loop (reader) gets every notice received while it reads, in order;
/// loops may come and go, and a loop whose task is cancelled ends (nil) without ending the others.
public struct LinkNotices: AsyncSequence, Sendable {
    /// A message the relay pushed (`isEarly` when it came before the handshake completed).
    public typealias Element = Message
    let path: LinkNoticePath

    /// One reader's place: the notices received since it was made.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let subscription: EventSubscription<Message>
        /// The next notice, from whichever connection the link has; nil once the link stopped (and the notices
        /// already received were read), or when the task is cancelled.
        public mutating func next() async -> Message? { await subscription.next() }
    }

    /// A reader of every notice from now on. The first one made starts the link's reading of the streams the relay
    /// opens (from then on they belong to the link, not to `TransportConnection.incomingStreams` readers).
    public func makeAsyncIterator() -> AsyncIterator {
        let subscription = path.broadcast.subscribe()
        path.want()
        return AsyncIterator(subscription: subscription)
    }
}

/// The notice path of a link: the streams the relay opens on each connection the link makes, read into one
/// broadcast that lives as long as the link.
final class LinkNoticePath: Sendable {
    /// The unread notices a reader holds before the oldest is dropped.
    static let capacity = 1_024
    let broadcast = EventBroadcast<Message>(capacity: LinkNoticePath.capacity)
    /// Which connection to read the relay's streams of.
    private let follower = Locked(LinkFollower())

    /// The link has a new ready connection.
    func attach(_ connection: TransportConnection) {
        if let start = follower.withLock({ $0.attach(connection) }) { read(start) }
    }

    /// The link's connection ended (or was replaced).
    func detach(_ connection: TransportConnection) {
        follower.withLock { $0.detach(connection) }
    }

    /// An app reads `notices`: read from now on, starting with the connection the link has now.
    func want() {
        if let connection = follower.withLock({ $0.want() }) { read(connection) }
    }

    /// The link stopped: readers get what was received, then nil.
    func finish() { broadcast.finish() }

    /// Publishes the messages of every stream the relay opens on `connection` until it closes.
    private func read(_ connection: TransportConnection) {
        Task { [broadcast] in
            await withDiscardingTaskGroup { group in
                for await stream in connection.incomingStreams {
                    group.addTask {
                        while let message = try? await stream.nextMessage() { broadcast.publish(message) }
                    }
                }
            }
        }
    }
}
