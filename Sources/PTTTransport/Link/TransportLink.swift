import TransportCore
import TransportIO

/// A long-lived link to one relay: it connects, and whenever the connection dies for a reason a retry can fix it
/// connects again, resuming TLS and replaying the app's rejoin messages in 0-RTT, with capped exponential backoff
/// between failed attempts. Its `statusUpdates` map one to one onto PushToTalk's service status.
///
/// ```swift
/// let client = TransportClient(configuration: .init(serverName: "relay.example", trust: .caFile("ca.pem")))
/// let link = TransportLink(
///     client: client, to: ServerAddress(host: "relay.example", port: 4433),
///     rejoin: [EarlyMessage(Array("join 7".utf8), replaySafe: true)],
///     resumption: .file("/var/mobile/relay.session"))
/// Task {
///     for await status in link.statusUpdates {
///         print("service status:", status)  // .connecting / .ready / .reconnecting / .stopped
///     }
/// }
/// let player = Task {
///     for await frame in link.datagrams { _ = frame.payload }  // every connection's audio, across reconnects
/// }
/// try link.sendDatagram([0x01, 0x02])  // dropped and counted while the link reconnects, never queued
/// let floor = try await link.request(Array("talk 7".utf8))  // the relay's reply, on the link's control stream
/// link.networkChanged()  // the OS reported a new path: reconnect now
/// await link.suspend()  // the app is going to sleep: close cleanly, keep the session
/// let answers = try await link.wake(pending: [EarlyMessage(Array("pending burst 7".utf8), replaySafe: true)])
/// _ = try await answers?.nextMessage()  // the answer to "join 7" comes first, then the burst
/// _ = try await answers?.nextMessage()
/// link.stop()  // ends `datagrams`, so the player ends too
/// ```
///
/// What it does:
/// - Connects with `TransportClient.connect`, so the client's `fallback` applies (QUIC raced against TCP).
/// - Keeps the newest `ResumptionState` (loaded once from its `ResumptionStore`, saved there on every refresh)
///   and passes it to every connect: a reconnect resumes TLS, and over QUIC sends the replay-safe prefix of the
///   rejoin messages in 0-RTT (the transport re-sends them in 1-RTT if the relay refuses early data). The rejoin
///   messages go on every connection exactly once, on its `earlyStream`.
/// - Retries after `ReconnectBackoff` (gRPC's rules: 1 s, ×1.6, ±20 %, at most 120 s); the retry after
///   `networkChanged()` or a stateless reset (the relay restarted) is immediate.
/// - Leaves a dead relay for another address of its name: after a connection that ended on its own (timed out,
///   went silent mid-burst, closed or reset by the relay), the next attempts try the name's other addresses
///   (`ClientConfiguration.resolve`, or the resolver's answer) before the one that died; a network change forgets
///   it. A name with one address is retried as before.
/// - Stops, with status `.stopped(error)`, on what retrying cannot fix: an untrusted, expired or misnamed
///   certificate, an ALPN or TLS-version mismatch, an invalid configuration or rejoin message.
///
/// - Important: A connection the link hands out is replaced, not repaired: once it closes, ask `nextReady()`
///   for the next one. Dropping the last reference to the link stops it and closes its connection.
public final class TransportLink: Sendable {
    let engine: LinkEngine

    /// A link to `address` through `client`, which starts connecting at once.
    ///
    /// - Parameters:
    ///   - client: the client whose configuration (trust, ALPN, fallback, keep-alive) every connection uses.
    ///   - address: the relay.
    ///   - rejoin: the messages that put this app back where it was (join the channel, ask for the pending
    ///     burst), sent first on every connection; mark them `replaySafe` to let them travel in 0-RTT.
    ///   - resumption: where to keep the resumption state (default: in memory only).
    ///   - backoff: how quickly to try again after a failure (default: gRPC's rules).
    public convenience init(
        client: TransportClient, to address: ServerAddress, rejoin: [EarlyMessage] = [],
        resumption: ResumptionStore = .memoryOnly, backoff: ReconnectBackoff = ReconnectBackoff()
    ) {
        self.init(client: client, to: address, rejoinEach: { rejoin }, resumption: resumption, backoff: backoff)
    }

    /// A link whose rejoin messages depend on where the app is now: `rejoin` is asked before every connection
    /// attempt (on the link's task; keep it quick), so a talker holding the floor re-sends its floor request
    /// after a reconnect without doing it by hand.
    ///
    /// - Parameters:
    ///   - client: the client whose configuration (trust, ALPN, fallback, keep-alive) every connection uses.
    ///   - address: the relay.
    ///   - rejoin: returns the messages to send first on the next connection (see the other initializer).
    ///   - resumption: where to keep the resumption state (default: in memory only).
    ///   - backoff: how quickly to try again after a failure (default: gRPC's rules).
    public init(
        client: TransportClient, to address: ServerAddress, rejoinEach rejoin: @escaping @Sendable () -> [EarlyMessage],
        resumption: ResumptionStore = .memoryOnly, backoff: ReconnectBackoff = ReconnectBackoff()
    ) {
        engine = LinkEngine(
            client: client, address: address, rejoin: rejoin, store: resumption, policy: backoff.policy)
        engine.start()
    }

    deinit { engine.released() }

    /// The relay this link connects to.
    public var address: ServerAddress { engine.address }

    /// The current status (`statusUpdates` delivers its changes).
    public var status: LinkStatus { engine.statuses.current ?? .connecting }

    /// Every status from the current one on, ending with `.stopped`. Any number of tasks can iterate it; none
    /// misses a step.
    public var statusUpdates: LinkStatusUpdates { LinkStatusUpdates(base: engine.statuses) }

    /// The connection while the link is ready; nil while it connects, waits to retry, is suspended or stopped.
    public var connection: TransportConnection? {
        engine.state.withLock { $0.networkChanged ? nil : $0.connection?.connection }
    }

    /// The newest resumption state the link holds (the one its next connection will resume from).
    public var resumptionState: ResumptionState? { engine.state.withLock { $0.saved } }

    /// Returns the ready connection, waiting for the link to connect if it is not ready now. A suspended link
    /// stays suspended: this waits for `wake(pending:)`. Right after `networkChanged()` it waits for the new
    /// connection (the one up then is being closed).
    ///
    /// - Throws: the error the link stopped with (`TransportError`; `connectionClosed` after `stop()`), or
    ///   `CancellationError`.
    public func nextReady() async throws -> TransportConnection {
        try await engine.nextReady(minimumID: 0).connection
    }

    /// Tells the link that the device's network changed (Wi-Fi to cellular, a new interface): a connection
    /// that is up is closed and replaced at once (its path may be gone; over TCP it is), and a link waiting to
    /// retry tries now. The reconnect resumes with 0-RTT, so it costs about one round trip.
    public func networkChanged() { engine.networkChanged() }

    /// Closes the connection cleanly (application code 0) and keeps the resumption state; the link then waits,
    /// `.suspended`, for `wake(pending:)`. For an app the OS is about to suspend. The connection's newest state is
    /// saved to the `ResumptionStore` first; right after the handshake, before the relay's ticket came, that waits
    /// for the ticket (at most 1 s). Returns once the close is sent.
    public func suspend() async { await engine.suspend() }

    /// Connects now (a suspended link, or one waiting to retry), with `pending` sent after the rejoin messages —
    /// in 0-RTT when they are replay-safe — and returns the stream that carried them: the connection's
    /// `earlyStream`.
    ///
    /// **One order of answers, ready or not:** the returned stream yields the answers to the connection's rejoin
    /// messages first, then the answers to `pending`, in order. After a reconnect both went in the new
    /// connection's first flight; on a link already ready, `pending` goes on the current connection's
    /// `earlyStream` after the rejoin messages it carried (so read, or skip, as many rejoin answers as your
    /// relay sends, unless you read them already from `earlyStream`). A connection made without any rejoin
    /// message has no early stream: then `pending` goes on a new stream, whose answers are only theirs. Nil
    /// when the connection has no early stream and there was nothing to send.
    ///
    /// - Throws: the error the link stopped with, `CancellationError`, or the connection's error when sending
    ///   on an open connection fails.
    @discardableResult
    public func wake(pending: [EarlyMessage] = []) async throws -> TransportStream? {
        try await engine.wake(pending: pending)
    }

    /// Stops the link for good: closes the connection (code 0) and publishes `.stopped(nil)`.
    public func stop() { engine.stop() }
}
