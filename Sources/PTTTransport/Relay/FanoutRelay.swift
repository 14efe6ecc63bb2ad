import TransportIO

/// A fan-out relay: every datagram received from one connection is forwarded to every other connection of the
/// same channel — one talker's audio frames played to all listeners. It forwards datagrams only; it never reads
/// streams and never forwards a frame back to its sender.
///
/// Channel membership is simple on purpose: **all connections of the server form one channel**. DESIGN.md names
/// join/leave and begin/end-talk control messages but fixes no format for them yet, so this relay reads no control
/// messages: a peer-opened stream is left unread (flow control bounds what it can buffer). The talker is whoever
/// sends: a frame from any member goes to all the others, so floor control (one talker at a time) is the
/// application's job.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: configuration)
/// await FanoutRelay.run(server)   // until the server shuts down
/// ```
///
/// - Important: Forwarding runs on the server's event loop as each frame is received (`setDatagramHandler`):
///   no task hop, no `await` per listener per frame. Frames that arrived in 0-RTT are never forwarded before the
///   handshake completed (the server holds a connection's early datagrams until then). A forwarded frame that
///   cannot be sent within `frameLifetime` is dropped and counted in the listener connection's
///   `datagramsExpired`; a frame larger than a listener's `maxDatagramPayloadSize` is dropped for that listener.
public enum FanoutRelay {
    /// Forwards datagrams among all connections of `server` until the server shuts down.
    ///
    /// - Parameters:
    ///   - frameLifetime: how long a forwarded frame may wait to be sent before it is dropped as stale (audio
    ///     played late is worse than audio lost).
    ///   - statistics: where to count frames and record each frame's forwarding latency (optional).
    public static func run(_ server: TransportServer, frameLifetime: Duration = .milliseconds(100),
                           statistics: FanoutStatistics? = nil) async {
        let channel = FanoutChannel(loop: server.loop, frameLifetime: frameLifetime, statistics: statistics)
        await withDiscardingTaskGroup { group in
            for await connection in server.connections {
                group.addTask { await channel.serve(connection) }
            }
        }
    }
}

/// The members of one channel. Loop-confined: membership changes and forwarding all run on the server's event
/// loop (the datagram handlers run there, and `serve` hops there to join and leave).
final class FanoutChannel: @unchecked Sendable {
    // @unchecked Sendable invariant: `members` is read and written only on the server's event-loop thread.
    private let loop: EventLoop
    private let lifetime: UInt64
    private let statistics: FanoutStatistics?
    /// In join order; the sender is skipped when forwarding.
    private var members: [TransportConnection] = []

    init(loop: EventLoop, frameLifetime: Duration, statistics: FanoutStatistics?) {
        self.loop = loop
        self.statistics = statistics
        let (seconds, attoseconds) = frameLifetime.components
        lifetime = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Adds `connection` to the channel and forwards its datagrams until it closes, then removes it.
    func serve(_ connection: TransportConnection) async {
        _ = try? await loop.submit { [self] in members.append(connection) }
        await connection.setDatagramHandler { [self, weak connection] datagram in
            if let connection { forward(datagram.payload, from: connection) }
        }
        _ = try? await connection.closed()  // or this task was cancelled: leave the channel either way
        _ = try? await loop.submit { [self] in members.removeAll { $0 === connection } }
    }

    /// Loop thread: one received frame to every other member.
    private func forward(_ payload: [UInt8], from sender: TransportConnection) {
        guard !payload.isEmpty else { return }  // a peer's empty DATAGRAM: nothing to play, and nothing to send
        let received = MonotonicNow.nanoseconds()
        let deadline = received &+ lifetime
        var copies = 0
        for member in members where member !== sender {
            try? member.backend.sendDatagram(payload, deadline: deadline)
            copies += 1
        }
        guard let statistics else { return }
        // The copies are written by the listeners' flushes, deferred to the end of this loop turn; this runs
        // after them.
        loop.deferUntilIdle { [copies] in
            statistics.record(copies: copies, latencyNanoseconds: MonotonicNow.nanoseconds() &- received)
        }
    }
}
