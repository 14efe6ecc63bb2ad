import PTTTransport

/// A fan-out relay: every datagram received from one connection is forwarded to every other connection — one
/// talker's audio frames played to all listeners. It forwards datagrams only; it never reads streams and never
/// forwards a frame back to its sender.
///
/// This is the one-channel special case of `RelayChannel`: **all connections of the server join one channel**.
/// It reads no control messages: a peer-opened stream is left unread (flow control bounds what it can buffer).
/// The talker is whoever sends: a frame from any member goes to all the others. For floor control (one talker at a
/// time, `FloorControl`), liveness checks, or several talk groups on one server, use `RelayChannel` directly.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: configuration)
/// await FanoutRelay.run(server)   // until the server shuts down
/// ```
///
/// - Important: Forwarding runs on the server's event loops as each frame is received (`setDatagramHandler`):
///   no task hop, no `await` per listener per frame; each loop writes the copies for its own listeners (one
///   hand-off per frame per other loop). Frames that arrived in 0-RTT are forwarded before the
///   handshake completed only with `EarlyDataPolicy.deliverEarlyDatagrams` (by default the server holds a
///   connection's early datagrams until then). A forwarded frame that
///   cannot be sent within `frameLifetime` is dropped and counted in the listener connection's
///   `datagramsExpired`; a frame larger than a listener's `maxDatagramPayloadSize` is dropped for that listener.
public enum FanoutRelay {
    /// Forwards datagrams among all connections of `server` until the server shuts down (or the calling task is
    /// cancelled; then the channel empties and forwarding stops).
    ///
    /// - Parameters:
    ///   - server: the relay whose accepted connections all join the one channel.
    ///   - frameLifetime: how long a forwarded frame may wait to be sent before it is dropped as stale (audio
    ///     played late is worse than audio lost).
    ///   - statistics: where to count frames and record each frame's forwarding latency (optional).
    public static func run(
        _ server: TransportServer, frameLifetime: Duration = .milliseconds(100),
        statistics: FanoutStatistics? = nil
    ) async {
        let channel = RelayChannel(server: server, frameLifetime: frameLifetime, statistics: statistics)
        for await connection in server.connections {
            try? await channel.join(connection)  // never throws: the connection is the server's own
        }
        // The server shut down (its connections closed and left) or this task was cancelled: releasing the
        // channel here empties it.
        withExtendedLifetime(channel) {}
    }
}
