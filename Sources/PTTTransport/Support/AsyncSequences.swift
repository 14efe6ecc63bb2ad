/// Received audio datagrams. Bounded: when the application falls behind, the oldest are dropped and counted in
/// `ConnectionStatistics.datagramsDropped`. Each datagram goes to one reader; a loop whose task is cancelled ends
/// (nil) and the datagrams that arrive later wait for the next loop.
public struct IncomingDatagrams: AsyncSequence, Sendable {
    /// A received datagram.
    public typealias Element = Datagram
    package let base: Mailbox<Datagram>

    /// Takes the connection's next received datagram on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let base: Mailbox<Datagram>
        /// The next datagram; nil once the connection closed, or when the task is cancelled.
        public mutating func next() async -> Datagram? { await base.next() }
    }

    /// An iterator taking the next datagrams not yet taken.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base) }
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

/// The latest value of something a connection refreshes (its resumption state, its peer's address): each
/// iteration starts with the current value, if there is one, then yields every new one — keeping only the newest
/// it has not read — and ends when the connection closes. Any number of tasks can iterate it.
public struct LatestValues<Element: Sendable>: AsyncSequence, Sendable {
    let base: ValueBroadcast<Element>

    /// One subscription.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.AsyncIterator
        /// The next value (the newest not yet read); nil once the connection closed, or when the iterating task
        /// is cancelled.
        public mutating func next() async -> Element? { await base.next() }
    }

    /// Subscribes: the first element is the current value, if there is one.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.subscribe().makeAsyncIterator()) }
}

/// Refreshed resumption states of a client connection (see `TransportConnection.resumptionStates`).
public typealias ResumptionStates = LatestValues<ResumptionState>

/// The peer's address, then each new one after a NAT rebinding (see `TransportConnection.remoteAddresses`).
public typealias RemoteAddresses = LatestValues<String>

/// Streams the peer opens, in order, each delivered once. Ends when the connection closes. Any number of loops
/// may read it, one after another or concurrently; a loop whose task is cancelled ends (nil) without affecting the
/// others: streams that arrive later go to the next loop.
public struct IncomingStreams: AsyncSequence, Sendable {
    /// A stream the peer opened.
    public typealias Element = TransportStream
    let base: Mailbox<IncomingStreamHandle>
    let connection: TransportConnection

    /// Takes the connection's next incoming stream on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let base: Mailbox<IncomingStreamHandle>
        let connection: TransportConnection

        /// The next stream the peer opened; nil once the connection closed, or when the task is cancelled.
        public mutating func next() async -> TransportStream? {
            guard let handle = await base.next() else { return nil }
            return TransportStream(handle: handle, connection: connection)
        }
    }

    /// An iterator taking the next streams not yet taken.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base, connection: connection) }
}

/// Connections a server accepted, each delivered once its handshake completed (with
/// `EarlyDataPolicy.deliverBeforeHandshake` or `deliverEarlyDatagrams`, as soon as it arrives).
///
/// Any number of accept loops may read it, one after another or concurrently, each connection delivered once; a
/// loop whose task is cancelled ends (nil) without ending the sequence: connections that arrive later go to the
/// next loop.
public struct IncomingConnections: AsyncSequence, Sendable {
    /// A connection the server accepted.
    public typealias Element = TransportConnection
    let base: Mailbox<TransportConnection>

    /// Takes the server's next accepted connection on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let base: Mailbox<TransportConnection>
        /// The next accepted connection; nil once the server shut down, or when the task is cancelled.
        public mutating func next() async -> TransportConnection? { await base.next() }
    }

    /// An iterator taking the next connections not yet taken.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base) }
}
