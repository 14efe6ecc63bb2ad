import PTTTransport
import TransportCore
import TransportIO

/// A talk group on a relay: every datagram received from one member is forwarded to every other member — one
/// talker's audio frames played to all listeners of the channel, never sent back to the talker.
///
/// Make one channel per talk group of a `TransportServer` and move connections between them with `join(_:)`.
/// A connection is in at most one `RelayChannel` at a time: joining another channel moves it, so from then on its
/// frames go only to the new channel's other members (exactly once each), and it receives only that channel's
/// frames.
/// A connection that closes leaves its channel by itself. The channel forwards datagrams only; it never reads
/// streams, so control messages (who joins which group, who asks for the floor) stay the application's.
///
/// With `floor:` (`FloorControl`), only the member holding the floor is heard: the application grants it with
/// `requestFloor(for:)` (on a "talk" message from the phone, say), frames from every other member are dropped at the
/// relay and counted (`framesRefused`), and the channel takes the floor back by itself when the talker releases it,
/// leaves, closes, or falls silent for `FloorControl.idleRelease`; `floorEvents` says what happened, for the
/// application to tell the members. With `liveness:` (`LivenessCheck`), a member that vanished mid-burst leaves the
/// channel within a second, without a shorter idle timeout for the quiet ones.
///
/// ```swift
/// let channel = RelayChannel(server: server, floor: FloorControl(policy: .queue(limit: 4)), liveness: LivenessCheck())
/// try await channel.join(connection)
/// switch try await channel.requestFloor(for: connection) {   // on the phone's "talk" message
/// case .granted: break                                      // its audio is forwarded from now on
/// case .queued(let position): print("queued at \(position)")
/// case .denied(let holder): print("\(holder) is talking")
/// }
/// for await event in channel.floorEvents { /* tell the members */ }
/// ```
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
    let cores: [ChannelMembers]
    /// Joins so far: the order `members` lists connections in, whichever loop they live on.
    private let joins = Locked<UInt64>(0)
    /// The floor, with `FloorControl`.
    let floor: ChannelFloor?
    /// The channel's side of the fleet's trunks (nil: a relay on its own).
    let trunk: ChannelTrunk?
    /// How the floor is controlled (nil: every member's frames are forwarded).
    public let floorControl: FloorControl?
    /// How vanished members are noticed (nil: only by their connections' idle timeout).
    public let liveness: LivenessCheck?
    /// How much of the current burst is kept for members that join late (nil: none, and frames are opaque).
    public let burstBuffer: BurstBufferPolicy?
    /// The burst buffer, shared by the loops.
    let burst: ChannelBurst?
    /// The catch-ups' counters, shared by the loops.
    private let catchUps = CatchUpCounters()
    /// What happened to the floor, in order: grants, releases (and why), denials (and why), places in line as they
    /// change, revokes, talk-time warnings. Each access is a new reader that gets every event from then on, in
    /// order, whatever other readers do; a reader whose task is cancelled ends only its own sequence. A reader that
    /// falls 65,536 events behind loses its oldest. Ends when the channel is released; without `FloorControl` it
    /// ends at once.
    public var floorEvents: AsyncStream<FloorEvent> {
        guard let floor else { return AsyncStream { $0.finish() } }
        let subscription = floor.updates.subscribe()
        return AsyncStream { await subscription.next()?.event }
    }

    /// `floorEvents` with the identity of each member an event names and when it happened: every reader gets every
    /// update from its access on, as `floorEvents` does.
    public var floorUpdates: AsyncStream<FloorUpdate> {
        guard let floor else { return AsyncStream { $0.finish() } }
        let subscription = floor.updates.subscribe()
        return AsyncStream { await subscription.next() }
    }

    /// A channel forwarding among connections of `server`, on the server's event loops.
    ///
    /// - Parameters:
    ///   - server: the relay whose connections may join; forwarding runs on its event loops (a frame is written to
    ///     each listener by the loop that listener's connection lives on).
    ///   - frameLifetime: how long a forwarded frame may wait to be sent before it is dropped as stale (audio
    ///     played late is worse than audio lost).
    ///   - statistics: where to count frames and record each frame's forwarding latency (optional; one
    ///     `FanoutStatistics` may serve several channels).
    ///   - floor: floor control — one talker at a time (nil, the default: every member's frames are forwarded).
    ///   - liveness: probe members whose audio stopped and remove those that vanished (nil, the default: a vanished
    ///     member stays until its connection's idle timeout).
    ///   - burstBuffer: keep each burst (a grant's frames, which then must be audio frames with an
    ///     `AudioFrameHeader`) for members that join late, replayed with `catchUp(_:burst:from:)` (nil, the
    ///     default: frames are forwarded as they come, whatever they hold). Needs `floor`: a burst is a grant.
    public convenience init(
        server: TransportServer, frameLifetime: Duration = .milliseconds(100),
        statistics: FanoutStatistics? = nil, floor: FloorControl? = nil, liveness: LivenessCheck? = nil,
        burstBuffer: BurstBufferPolicy? = nil
    ) {
        self.init(
            server: server, frameLifetime: frameLifetime, statistics: statistics, floor: floor, liveness: liveness,
            burstBuffer: burstBuffer, onFloor: nil, trunk: nil)
    }

    /// A channel whose floor events are also handed, with identities and bursts, to `onFloor` (under the floor's
    /// lock, in order: it must return at once), and whose talker's frames also go to `trunk`'s peer relays.
    init(
        server: TransportServer, frameLifetime: Duration, statistics: FanoutStatistics?, floor: FloorControl?,
        liveness: LivenessCheck?, burstBuffer: BurstBufferPolicy?, onFloor: (@Sendable (FloorNotice) -> Void)?,
        trunk: ChannelTrunk?
    ) {
        self.trunk = trunk
        self.frameLifetime = frameLifetime
        self.statistics = statistics
        self.floorControl = floor
        self.liveness = liveness
        let burst = floor == nil ? nil : burstBuffer.map(ChannelBurst.init)
        self.burstBuffer = burst == nil ? nil : burstBuffer
        self.burst = burst
        let channelFloor = floor.map { ChannelFloor($0, burst: burst, observer: onFloor) }
        self.floor = channelFloor
        cores = ChannelMembers.group(
            loops: server.loops, frameLifetime: frameLifetime, statistics: statistics, floor: channelFloor,
            liveness: liveness, burst: burst, catchUps: catchUps, trunk: trunk)
    }

    deinit {
        for core in cores { core.loop.execute { core.removeAll() } }
    }

    /// The members on `connection`'s loop, nil when it is not one of the server's loops.
    private func core(for connection: TransportConnection) -> ChannelMembers? {
        cores.first { $0.loop === connection.backend.loop }
    }

    /// The error for a connection of another server.
    private func foreign(_ connection: TransportConnection) -> TransportError {
        TransportError(
            .invalidConfiguration,
            "\(connection.id) is not a connection of this channel's "
                + "server; a channel forwards among the connections one server accepted")
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
        try await join(connection, identity: nil)
    }

    /// Adds `connection` to this channel as `member` (the user its app authenticated) in `role`, as `join(_:)` does:
    /// the floor and its events name the member by this identity. A ``FloorRole/receiveOnly`` member only listens:
    /// its floor requests are denied with ``FloorDenyCause/receiveOnly`` (MCPTT reject cause #5) and its frames are
    /// dropped and counted in ``framesRefused``.
    ///
    /// - Throws: `invalidConfiguration` when `connection` was not accepted by this channel's server.
    public func join(
        _ connection: TransportConnection, as member: MemberIdentity, role: FloorRole = .transmitAndReceive
    ) async throws(TransportError) {
        try await join(connection, identity: member, role: role)
    }

    private func join(
        _ connection: TransportConnection, identity: MemberIdentity?, role: FloorRole = .transmitAndReceive
    ) async throws(TransportError) {
        guard let core = core(for: connection) else { throw foreign(connection) }
        let order = nextJoin()
        // One loop turn adds the member and installs its handler (a woken member's catch-up waits for its join:
        // every hop here delays its first audio). Every join installs an equivalent handler (it asks the
        // membership where to forward), so the order in which racing joins install theirs does not matter.
        _ = try? await core.loop.submit { Self.add(connection, to: core, order: order, as: identity, role: role) }
    }

    /// On `connection`'s loop (a relay acting on a 0-RTT join in the turn it arrived): `join(_:as:role:)` without
    /// the hop. False when called off that loop or for another server's connection (nothing changed).
    func joinOnLoop(_ connection: TransportConnection, as member: MemberIdentity, role: FloorRole) -> Bool {
        guard let core = core(for: connection), core.loop.inEventLoop else { return false }
        Self.add(connection, to: core, order: nextJoin(), as: member, role: role)
        return true
    }

    private func nextJoin() -> UInt64 {
        joins.withLock { joins in
            joins += 1
            return joins
        }
    }

    /// Loop thread (`core`'s): adds the member and installs its handler, in one turn.
    private static func add(
        _ connection: TransportConnection, to core: ChannelMembers, order: UInt64, as identity: MemberIdentity?,
        role: FloorRole = .transmitAndReceive
    ) {
        guard let membership = ChannelMembership.of(connection) else { return }
        core.add(connection, membership, order: order, as: identity, role: role)
        connection.backend.installDatagramHandler { datagram in membership.receive(datagram) }
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

    // MARK: - Floor control

    /// `member` asks for the floor. Granted at once when the floor is idle (or `member` holds it already);
    /// otherwise queued or denied as `FloorControl.policy` says. The answer also goes to `floorEvents` (but a repeated
    /// request that changes nothing).
    ///
    /// From the grant on, `member`'s frames are forwarded and everyone else's are dropped; its idle time
    /// (`FloorControl.idleRelease`) counts from the grant until its first frame.
    ///
    /// - Throws: `invalidConfiguration` when the channel has no `FloorControl` or `member` belongs to another
    ///   server; `notAMember` when `member` is not in this channel (never joined, left, moved, or closed).
    public func requestFloor(for member: TransportConnection) async throws(TransportError) -> FloorRequestResult {
        try await requestFloor(for: member, FloorRequest())
    }

    /// `member` asks for the floor with `request`'s priority and urgency, as TS 24.380's floor control server
    /// decides (see "Floor control and liveness"): granted when the floor is idle; granted at once when it pre-empts
    /// the holder (an emergency or imminent-peril request over a less urgent holder, or a priority above the
    /// holder's that reaches the group's ``FloorServerConfiguration/preemptivePriority``; the holder gets
    /// `FloorEvent.revoked` and `released` with reason `.preempted`, in the same step); otherwise queued (by urgency,
    /// then priority, then arrival) or denied with its reject cause.
    ///
    /// - Throws: as `requestFloor(for:)`.
    public func requestFloor(
        for member: TransportConnection, _ request: FloorRequest
    ) async throws(TransportError) -> FloorRequestResult {
        guard let floor else {
            throw TransportError(.invalidConfiguration, "this channel has no floor control (RelayChannel(floor:))")
        }
        guard let core = core(for: member) else { throw foreign(member) }
        let id = member.id
        // On the member's loop, where it joins and leaves: it cannot leave between the check and the request.
        let answer = try? await core.loop.submit { [self] () -> FloorRequestResult? in
            guard core.contains(id) else { return nil }
            let holder = floor.holder
            let heldBurst = burst?.state(now: MonotonicClock.now())
            let result = floor.request(id, request)
            if case .granted = result, let holder, holder != id, floor.holder == id {
                dropPreemptedFrames(of: heldBurst.flatMap { $0.ended ? nil : $0.burst })
            }
            return result
        }
        guard let result = answer ?? nil else {
            throw TransportError(.notAMember, "\(id) is not a member of this channel, so it cannot take its floor")
        }
        return result
    }

    /// The holder was pre-empted: its frames (of `burst`; nil: frames are opaque, so every queued frame, all of
    /// them its own) still queued for the members, on every loop, are dropped before they reach a socket, so the
    /// listeners hear at most what had already left when the new talker was granted the floor.
    private func dropPreemptedFrames(of burst: UInt64?) {
        for core in cores {
            if core.loop.inEventLoop {
                core.dropQueuedFrames(of: burst)
            } else {
                core.loop.execute { core.dropQueuedFrames(of: burst) }
            }
        }
    }

    /// `member` gives up the floor (`FloorEvent.released` with reason `.released`; the first member waiting is
    /// granted it), or its place in line (no event). Returns whether it held the floor or waited; nothing happens
    /// otherwise, and always without `FloorControl`.
    @discardableResult
    public func releaseFloor(for member: TransportConnection) -> Bool {
        floor?.release(member.id) ?? false
    }

    /// Takes the floor from its holder (`FloorEvent.released` with reason `.revoked`; the first member waiting is
    /// granted it). Returns who held it; nil when nobody did.
    @discardableResult
    public func revokeFloor() -> TransportConnection.ID? {
        floor?.revoke()
    }

    /// Takes the floor from its holder and drops the line (nobody is granted it): the relay lost the authority
    /// over this floor (its fleet moved the group's home, or cannot confirm it). Returns who held it.
    @discardableResult
    func revokeFloorAndLine() -> TransportConnection.ID? {
        floor?.revokeAndEmptyLine()
    }

    /// The member holding the floor now (nil: the floor is idle, or the channel has no floor control).
    public var talker: TransportConnection.ID? { floor?.holder }

    /// Frames dropped so far because their sender did not hold the floor (0 without floor control).
    public var framesRefused: UInt64 { floor?.framesRefused ?? 0 }

    /// The member holding the floor now, by identity (nil: the floor is idle, or the channel has no floor control).
    public var talkerIdentity: MemberIdentity? { floor?.talker?.member }

    // MARK: - Burst buffer and catch-up

    /// `member` joined late: it is sent the frames of `burst` (0: the burst held now) from `sequence` on, paced at up
    /// to 16 times real time, then the live ones — in order, none missing at the seam, none twice. Returns where
    /// the replay starts; the first frames leave at once, so a catch-up asked for in 0-RTT is answered at 0.5-RTT.
    /// A newer burst ends the replay (the member hears the new one live).
    ///
    /// - Throws: `invalidConfiguration` without a burst buffer or for another server's connection; `notAMember`
    ///   when `member` is not in this channel; `burstUnavailable` when the burst is not held (never here, ended and
    ///   aged out, or replaced); `sequenceInFuture` when `sequence` is beyond the burst's next frame. Nothing is
    ///   held for a refused catch-up.
    public func catchUp(
        _ member: TransportConnection, burst: UInt64, from sequence: UInt32
    ) async throws(TransportError) -> CatchUpStart {
        guard let buffer = self.burst else {
            throw TransportError(.invalidConfiguration, "this channel keeps no burst (RelayChannel(burstBuffer:))")
        }
        guard let core = core(for: member) else { throw foreign(member) }
        let id = member.id
        let answer = try? await core.loop.submit {
            Self.startCatchUp(id, in: core, buffer, burst: burst, from: sequence)
        }
        guard let answer else { throw TransportError(.connectionClosed, "the relay's event loops stopped") }
        return try answer.get()
    }

    /// On `member`'s loop (a relay acting on a 0-RTT catch-up in the turn it arrived): `catchUp(_:burst:from:)`
    /// without the hop, its first frames queued in this turn. Nil when called off that loop, without a burst
    /// buffer or for another server's connection.
    func catchUpOnLoop(
        _ member: TransportConnection, burst: UInt64, from sequence: UInt32
    ) -> Result<CatchUpStart, TransportError>? {
        guard let buffer = self.burst, let core = core(for: member), core.loop.inEventLoop else { return nil }
        let result = Self.startCatchUp(member.id, in: core, buffer, burst: burst, from: sequence)
        if case .success = result { catchUps.startedInFirstFlightTurn() }
        return result
    }

    /// Loop thread (`core`'s): starts the member's replay of `burst` from `sequence`, or says why not.
    private static func startCatchUp(
        _ id: TransportConnection.ID, in core: ChannelMembers, _ buffer: ChannelBurst, burst: UInt64,
        from sequence: UInt32
    ) -> Result<CatchUpStart, TransportError> {
        guard core.contains(id) else {
            return .failure(
                TransportError(.notAMember, "\(id) is not a member of this channel, so it cannot catch up on it"))
        }
        do throws(TransportError) {
            let start = try buffer.catchUp(burst: burst, from: sequence, now: MonotonicClock.now())
            _ = core.catchUp(id, from: start)
            return .success(start)
        } catch {
            return .failure(error)
        }
    }

    /// The burst held now (under way, or ended and still retained), nil without one or without a burst buffer.
    public var heldBurst: TalkGroupMessage.BurstState? { burst?.state(now: MonotonicClock.now()) }

    /// Drops a held burst whose retention after its end passed, freeing its memory (a new burst replaces it
    /// anyway; a relay with quiet groups calls this now and then).
    public func expireHeldBurst() { burst?.expire(now: MonotonicClock.now()) }

    /// What the catch-ups did so far.
    public var catchUpStatistics: CatchUpStatistics { catchUps.snapshot }

    /// Copies of frames handed to members' transports so far, over every loop (live frames; catch-up frames are
    /// in `catchUpStatistics`).
    public var copiesSent: UInt64 { cores.reduce(0) { $0 &+ $1.copiesSent.load(ordering: .relaxed) } }

    /// The burst buffer's use: bytes and frames held now, frames dropped to stay within its bounds, and the
    /// talker's datagrams dropped (not audio frames of its burst, or repeated). Zero without a burst buffer.
    public var burstBufferUsage: (bytes: Int, frames: Int, evicted: UInt64, dropped: UInt64) {
        burst?.usage ?? (0, 0, 0, 0)
    }
}
