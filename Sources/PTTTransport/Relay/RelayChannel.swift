import TransportIO

/// A talk group on a relay: every datagram received from one member is forwarded to every other member — one
/// talker's audio frames played to all listeners of the channel, never sent back to the talker.
///
/// Make one channel per talk group of a `TransportServer` and move connections between them with `join(_:)`.
/// A connection is in at most one `RelayChannel` at a time: joining another channel moves it, so from then on its
/// frames go only to the new channel's other members (exactly once each), and it receives only that channel's
/// frames.
/// A connection that closes leaves its channel by itself. The channel forwards datagrams only; it never reads
/// streams, so control messages (who joins which group, floor control) stay the application's.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: configuration)
/// let dispatch = RelayChannel(server: server)
/// let fire = RelayChannel(server: server)
/// for await connection in server.connections {
///     try await dispatch.join(connection)   // later: `try await fire.join(connection)` moves it
/// }
/// ```
///
/// - Important: Forwarding runs on the server's event loops as each frame is received (the channel installs the
///   member's `setDatagramHandler`): no task hop, no `await` per listener per frame. On a server with several
///   loops (`ServerConfiguration.eventLoops`), each loop writes the copies for the members living on it: a frame
///   costs one hand-off to each other loop that has members, not one per listener. `join`, `leave` and
///   `members` may be called from any task; each hops to the loop, so they are ordered with the frames: a frame
///   handled after `join` returned is forwarded in the new channel. Do not call `setDatagramHandler` on a member
///   yourself: that would take its frames away from the channel.
///
/// - Important: By default no 0-RTT audio is forwarded before the handshake completed (early data can be
///   replayed): a server holds a connection's early datagrams until then, even when
///   `EarlyDataPolicy.deliverBeforeHandshake` hands the connection out (and lets it join) before that. With
///   `EarlyDataPolicy.deliverEarlyDatagrams` a woken talker's 0-RTT frames are forwarded at once (those that
///   arrived before the join are handed to the channel when it joins); the anti-replay store keeps a replayed first
///   flight from delivering anything, in this relay process or another that shares its ticket key.
///
/// A forwarded frame that cannot be sent within `frameLifetime` is dropped and counted in the listener
/// connection's `datagramsExpired`; a frame larger than a listener's `maxDatagramPayloadSize` is dropped for that
/// listener; an empty frame is dropped. Releasing the last reference to a channel empties it.
public final class RelayChannel: Sendable {
    /// How long a forwarded frame may wait to be sent before it is dropped as stale.
    public let frameLifetime: Duration
    /// Where this channel counts frames and records forwarding latencies, if anywhere.
    public let statistics: FanoutStatistics?
    /// The channel's members on each of the server's loops, in the server's loop order.
    private let cores: [ChannelMembers]
    /// Joins so far: the order `members` lists connections in, whichever loop they live on.
    private let joins = Locked<UInt64>(0)

    /// A channel forwarding among connections of `server`, on the server's event loops.
    ///
    /// - Parameters:
    ///   - server: the relay whose connections may join; forwarding runs on its event loops (a frame is written to
    ///     each listener by the loop that listener's connection lives on).
    ///   - frameLifetime: how long a forwarded frame may wait to be sent before it is dropped as stale (audio
    ///     played late is worse than audio lost).
    ///   - statistics: where to count frames and record each frame's forwarding latency (optional; one
    ///     `FanoutStatistics` may serve several channels).
    public init(
        server: TransportServer, frameLifetime: Duration = .milliseconds(100),
        statistics: FanoutStatistics? = nil
    ) {
        self.frameLifetime = frameLifetime
        self.statistics = statistics
        cores = ChannelMembers.group(loops: server.loops, frameLifetime: frameLifetime, statistics: statistics)
    }

    deinit {
        for core in cores { core.loop.execute { core.removeAll() } }
    }

    /// The members on `connection`'s loop, nil when it is not one of the server's loops.
    private func core(for connection: TransportConnection) -> ChannelMembers? {
        cores.first { $0.loop === connection.backend.loop }
    }

    /// Adds `connection` to this channel, moving it out of the channel it was in, and returns once its frames are
    /// forwarded here. Joining the channel it is in already changes nothing; a closed connection joins nothing.
    ///
    /// From here on the connection's datagrams go to the channel, not to its `datagrams` sequence (frames already
    /// buffered there stay there). The channel keeps the connection open until it leaves.
    ///
    /// - Throws: `invalidConfiguration` when `connection` was not accepted by this channel's server (a client's
    ///   connection, or another server's): a channel forwards among one server's connections only.
    public func join(_ connection: TransportConnection) async throws(TransportError) {
        guard let core = core(for: connection) else {
            throw TransportError(
                .invalidConfiguration,
                "\(connection.id) is not a connection of this channel's "
                    + "server; a channel forwards among the connections one server accepted")
        }
        let order = joins.withLock { joins in
            joins += 1
            return joins
        }
        let joined = try? await core.loop.submit { () -> ChannelMembership? in
            guard let membership = ChannelMembership.of(connection) else { return nil }
            core.add(connection, membership, order: order)
            return membership
        }
        guard let membership = joined ?? nil else { return }  // closed, or its server shut down
        // Every join installs an equivalent handler (it asks the membership where to forward), so the order in
        // which racing joins install theirs does not matter.
        await connection.setDatagramHandler { datagram in membership.receive(datagram) }
    }

    /// Removes `connection` from this channel, if it is a member, and returns once no frame goes to it or from it
    /// through this channel. Its datagrams then go to its `datagrams` sequence again.
    public func leave(_ connection: TransportConnection) async {
        guard let core = core(for: connection) else { return }  // never a member
        let id = connection.id
        _ = try? await core.loop.submit { core.remove(id) }
    }

    /// The connections in the channel now, in join order (empty once the server shut down).
    public var members: [TransportConnection] {
        get async {
            var members: [(order: UInt64, connection: TransportConnection)] = []
            for core in cores { members += (try? await core.loop.submit { core.connections }) ?? [] }
            return members.sorted { $0.order < $1.order }.map(\.connection)
        }
    }
}
