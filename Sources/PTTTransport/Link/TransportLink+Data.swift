extension TransportLink {
    /// Audio datagrams from every connection the link makes, in turn: one loop hears the channel across
    /// reconnects, suspensions and wakes, and ends (nil) only when the link stops (or its task is cancelled).
    ///
    /// ```swift
    /// Task { for await frame in link.datagrams { play(frame.payload) } }
    /// ```
    ///
    /// The first loop (or iterator) starts the forwarding; from then on read the link's datagrams here, not
    /// the connections' `datagrams`, since each frame goes to one reader. Bounded like a connection's sequence
    /// (`ClientConfiguration.datagramReceiveBuffer`, the oldest dropped and counted in `datagramStatistics`).
    /// Each connection the link makes once this is read puts its frames here from the event-loop thread as they
    /// arrive, from its first packet on: a wake's 0.5-RTT frames are readable in the loop turn that completed the
    /// handshake, and every frame reaches the reader with one task hop (its own).
    public var datagrams: LinkDatagrams { LinkDatagrams(path: engine.datagramPath) }

    /// Sends an audio frame on the link's ready connection. While the link connects, reconnects or is suspended
    /// the frame is dropped and counted (`datagramStatistics.droppedWhileReconnecting`), never queued: a frame
    /// that waited for a reconnect would be stale audio. Never suspends.
    ///
    /// - Throws: `datagramEmpty`, `datagramTooLarge` (checked against the last connection's maximum while
    ///   reconnecting), `datagramsUnsupported`, as `TransportConnection.sendDatagram` does; the error the link
    ///   stopped with (`connectionClosed` after `stop()`).
    public func sendDatagram(_ payload: [UInt8], expiresAfter: Duration? = nil) throws {
        try engine.sendDatagram(payload, expiresAfter: expiresAfter)
    }

    /// What the datagram path did so far: frames sent, dropped while reconnecting, received, dropped unread.
    public var datagramStatistics: LinkDatagramStatistics { engine.datagramPath.statistics }

    /// Sends `message` on the link's control stream and returns the relay's reply (see `RequestChannel`: each
    /// request carries an ID, and the relay's reply names it — `RequestEnvelope`; requests may run concurrently).
    /// Waits for a ready connection first (a suspended link stays suspended: this waits for `wake(pending:)`).
    /// Each connection gets its own control stream, opened by the first request on it (not the `earlyStream`,
    /// which carries the rejoin answers); the relay answers on the stream the request came on.
    ///
    /// A request is never re-sent by the link: when the connection closes before the reply, this throws the
    /// connection's error and the app decides whether to ask again (the relay may have acted on it).
    ///
    /// - Throws: the errors of `RequestChannel.request(_:)`, the error the link stopped with, or
    ///   `CancellationError`.
    public func request(_ message: [UInt8]) async throws -> [UInt8] {
        try await engine.request(message)
    }
}

extension TransportLink {
    /// What the relay pushes to this phone (floor notices, the talker's identity, the queue position): every
    /// message on every stream the relay opens (`TransportConnection.pushNotice(_:)`), from each connection the link
    /// makes in turn — one loop hears them across reconnects, moves, suspensions and wakes, and ends (nil) only when
    /// the link stops (or its task is cancelled).
    ///
    /// ```swift
    /// Task { for await notice in link.notices { show(String(decoding: notice.bytes, as: UTF8.self)) } }
    /// ```
    ///
    /// Every loop gets every notice received while it runs; loops may come and go. Nothing is replayed: a notice
    /// the relay pushed while the phone had no connection (suspended, reconnecting) is not delivered, so a relay
    /// pushes the current state again when the phone rejoins. The first loop starts reading the relay-opened
    /// streams of the link's connections; from then on read them here, not on the connections'
    /// `incomingStreams`. A loop that falls 1,024 notices behind loses the oldest.
    public var notices: LinkNotices { LinkNotices(path: engine.noticePath) }
}
