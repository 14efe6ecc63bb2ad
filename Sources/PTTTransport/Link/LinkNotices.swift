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
    private struct State {
        /// Someone reads the link's notices: read every connection's relay-opened streams.
        var wanted = false
        /// The link's ready connection, while there is one.
        var current: TransportConnection?
        /// Connections whose streams are being read (one reader each), pruned as they close.
        var reading: Set<TransportConnection.ID> = []
    }

    /// The unread notices a reader holds before the oldest is dropped.
    static let capacity = 1_024
    let broadcast = EventBroadcast<Message>(capacity: LinkNoticePath.capacity)
    private let state = Locked(State())

    /// The link has a new ready connection.
    func attach(_ connection: TransportConnection) {
        let start = state.withLock { state -> Bool in
            state.current = connection
            return claim(&state)
        }
        if start { read(connection) }
    }

    /// The link's connection ended (or was replaced).
    func detach(_ connection: TransportConnection) {
        state.withLock { if $0.current === connection { $0.current = nil } }
    }

    /// An app reads `notices`: read from now on, starting with the connection the link has now.
    func want() {
        let connection = state.withLock { state -> TransportConnection? in
            state.wanted = true
            return claim(&state) ? state.current : nil
        }
        if let connection { read(connection) }
    }

    /// The link stopped: readers get what was received, then nil.
    func finish() { broadcast.finish() }

    /// Whether the caller must start reading `state.current` (wanted, and nobody reads it yet).
    private func claim(_ state: inout State) -> Bool {
        guard state.wanted, let current = state.current, !state.reading.contains(current.id) else { return false }
        state.reading.insert(current.id)
        return true
    }

    /// Publishes the messages of every stream the relay opens on `connection` until it closes.
    private func read(_ connection: TransportConnection) {
        Task { [broadcast, state] in
            await withDiscardingTaskGroup { group in
                for await stream in connection.incomingStreams {
                    group.addTask {
                        while let message = try? await stream.nextMessage() { broadcast.publish(message) }
                    }
                }
            }
            state.withLock { _ = $0.reading.remove(connection.id) }
        }
    }
}
