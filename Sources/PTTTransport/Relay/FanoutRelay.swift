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
/// - Important: Forwarding runs on the server's event loop, never on the cooperative pool: a received frame
///   wakes one reader isolated to the loop, which then queues the frame on each listener without suspending —
///   no `await` per listener per frame. (The datagram stream is an `AsyncStream`, which on Swift 6.3 resumes a
///   waiting reader through the global executor before it returns to the loop: one hop per received frame.)
///   Frames that arrived in 0-RTT are never forwarded before the handshake completed (the server holds a
///   connection's early datagrams until then). A forwarded frame that cannot be sent within `frameLifetime` is
///   dropped and counted in the listener connection's `datagramsExpired`; a frame larger than a listener's
///   `maxDatagramPayloadSize` is dropped for that listener.
public enum FanoutRelay {
    /// Forwards datagrams among all connections of `server` until the server shuts down.
    ///
    /// - Parameter frameLifetime: how long a forwarded frame may wait to be sent before it is dropped as stale
    ///   (audio played late is worse than audio lost).
    public static func run(_ server: TransportServer, frameLifetime: Duration = .milliseconds(100)) async {
        let channel = FanoutChannel(loop: server.loop, frameLifetime: frameLifetime)
        await withDiscardingTaskGroup { group in
            for await connection in server.connections {
                group.addTask { await channel.serve(connection) }
            }
        }
    }
}

/// The members of one channel, isolated to the server's event loop so that forwarding never leaves it.
actor FanoutChannel {
    private let loop: EventLoop
    private let lifetime: UInt64
    /// In join order; the sender is skipped when forwarding.
    private var members: [TransportConnection] = []

    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(loop: EventLoop, frameLifetime: Duration) {
        self.loop = loop
        let (seconds, attoseconds) = frameLifetime.components
        lifetime = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Adds `connection` to the channel and forwards its datagrams until it closes, then removes it.
    func serve(_ connection: TransportConnection) async {
        members.append(connection)
        // The raw stream, not `IncomingDatagrams`, whose iterator has no `next(isolation:)` and would add a hop.
        var datagrams = connection.datagrams.base.makeAsyncIterator()
        while let datagram = await datagrams.next(isolation: self) {
            let deadline = MonotonicNow.nanoseconds() &+ lifetime
            for member in members where member !== connection {
                try? member.backend.sendDatagram(datagram.payload, deadline: deadline)
            }
        }
        members.removeAll { $0 === connection }
    }
}
