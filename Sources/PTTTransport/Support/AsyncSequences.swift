/// Received audio datagrams. Bounded: when the application falls behind, the oldest are dropped and counted in
/// `ConnectionStatistics.datagramsDropped`. One consumer at a time.
public struct IncomingDatagrams: AsyncSequence, Sendable {
    public typealias Element = Datagram
    let base: AsyncStream<Datagram>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Datagram>.AsyncIterator
        public mutating func next() async -> Datagram? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}

/// Status changes of a connection, ending with `.closed`. Every iterator is its own subscription, so any number
/// of tasks can follow the status: each starts with the current status and sees every change after it, up to and
/// including `.closed` (an iterator made after the close yields `.closed` once, then ends).
public struct ConnectionStatusUpdates: AsyncSequence, Sendable {
    /// A connection status.
    public typealias Element = ConnectionStatus
    let broadcast: StatusBroadcast

    /// One subscription to the status.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<ConnectionStatus>.AsyncIterator
        /// The next status; nil after `.closed`, or when the iterating task is cancelled.
        public mutating func next() async -> ConnectionStatus? { await base.next() }
    }

    /// Subscribes: the first element is the current status.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: broadcast.subscribe().makeAsyncIterator()) }
}

/// Streams the peer opens, in order. Ends when the connection closes.
public struct IncomingStreams: AsyncSequence, Sendable {
    public typealias Element = TransportStream
    let base: AsyncStream<IncomingStreamHandle>
    let connection: TransportConnection

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<IncomingStreamHandle>.AsyncIterator
        let connection: TransportConnection
        public mutating func next() async -> TransportStream? {
            guard let handle = await base.next() else { return nil }
            return TransportStream(handle: handle, connection: connection)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), connection: connection)
    }
}

/// Connections a server accepted, each delivered once its handshake completed.
public struct IncomingConnections: AsyncSequence, Sendable {
    public typealias Element = TransportConnection
    let base: AsyncStream<TransportConnection>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<TransportConnection>.AsyncIterator
        public mutating func next() async -> TransportConnection? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}
