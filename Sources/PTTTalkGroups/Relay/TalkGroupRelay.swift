import PTTTransport
import TransportCore
import TransportIO

/// The application error code a `TalkGroupRelay` closes a connection with when the same user joined on a newer one
/// (a phone that reconnected before its old connection timed out): the newer connection replaces it, so no member
/// hears a frame twice.
public let replacedCloseCode: UInt64 = 0x5054_0003

/// A talk-group relay speaking the talk-group protocol (see the article *The talk-group protocol*): members are
/// users, authenticated at join, who stay members while their phones are suspended; each group has a floor, a
/// buffer of its current burst and catch-up for members that join late; and when a burst starts the app's
/// `WakeSender` is handed the suspended members to wake, with a `WakeTicket` for their pushes.
///
/// ```swift
/// let server = try await TransportServer.bind(configuration: ServerConfiguration(
///     quic: "0.0.0.0:4433", certificateChain: "/etc/relay/server.pem", privateKey: "/etc/relay/server.key",
///     ticketKeyFile: "/var/lib/relay/ticket.key",
///     earlyData: .enabled(deliverBeforeHandshake: true)))  // joins and catch-ups in 0-RTT answered at 0.5-RTT
/// let relay = TalkGroupRelay(
///     server: server,
///     configuration: .init(identity: RelayIdentity(serverName: "relay.example", port: 4433)),
///     authenticator: { request in await accounts.check(request.user, token: request.credential) },
///     wakeSender: pushGateway)
/// await relay.run()  // until the server shuts down
/// ```
///
/// What it does with each connection: it reads every stream the phone opens, one control message after another
/// (`TalkGroupMessage`), and answers on the same stream; floor notices (`floorTaken`, `floorReleased`) go to each
/// member on the stream it joined on. `join` and `catchUp` are acted on as soon as they arrive, in 0-RTT too (they
/// are replay-safe), and so is a woken talker's `requestFloor` in 0-RTT whose early data the transport accepted
/// (its ticket's single-use claim succeeded, so a replayed flight never gets there): its grant leaves at 0.5-RTT.
/// `releaseFloor` and `leave` that arrive in 0-RTT wait for the handshake.
/// Audio datagrams of the floor holder, with an `AudioFrameHeader` naming its burst, are forwarded to the group's
/// connected members on the relay's event loops and kept in the burst buffer.
///
/// - Important: For a 0-RTT join and catch-up to be answered at 0.5-RTT, bind the server with
///   `EarlyDataPolicy.enabled(deliverBeforeHandshake: true)` (and a ticket key, so tickets survive restarts).
public final class TalkGroupRelay: Sendable {
    /// The server whose connections the relay serves.
    public let server: TransportServer
    /// How it runs its groups.
    public let configuration: Configuration
    let admission: Admission
    private let dispatch: WakeDispatch?
    let onEvent: (@Sendable (TalkGroupEvent) -> Void)?
    let state: Locked<State>
    /// The relay's presence in its fleet's store (set by `run` with `Configuration.fleet`).
    let fleet = Locked<(presence: FleetPresence, events: AsyncStream<TalkGroupEvent>.Continuation)?>(nil)
    /// The relay's trunks to the other relays of its fleet (set by `run` with `Configuration.trunk`).
    let trunks = Locked<RelayTrunks?>(nil)
    private let notices: AsyncStream<(group: String, notice: FloorNotice)>
    /// The floor events counted so far (the rest of `statistics` is read from the channels and the wake hook).
    private let floorCounts = Locked(TalkGroupStatistics())
    private let noticeQueue: AsyncStream<(group: String, notice: FloorNotice)>.Continuation
    /// Each connection's user and stream outboxes, shared by the loop's early path and the connection's tasks.
    let connections = RelayConnections()
    /// Events of what the loop did at once, handed to `onEvent` by a task (it is called off the event loops).
    private let loopEvents: AsyncStream<TalkGroupEvent>
    let loopEventQueue: AsyncStream<TalkGroupEvent>.Continuation

    /// How joins are authenticated: by the app's check that may wait, or by one that answers at once (then a
    /// woken phone's 0-RTT join and catch-up are acted on in the loop turn that reads them).
    enum Admission: Sendable {
        case waiting(Authenticator)
        case immediate(ImmediateAuthenticator)

        func admits(_ join: TalkGroupMessage.JoinRequest) async -> Bool {
            switch self {
            case .waiting(let check): await check(join)
            case .immediate(let check): check(join)
            }
        }
    }

    struct State {
        var roster: MemberRoster
        var channels: [String: RelayChannel] = [:]
        /// Each connected member's join stream (where floor notices go) and connection.
        var sessions: [MemberIdentity: StreamOutbox] = [:]
        /// When each member's pending floor request arrived (MonotonicClock), for the wake hook's latency.
        var requestedAt: [MemberIdentity: UInt64] = [:]
    }

    /// A relay for `server`'s connections.
    ///
    /// - Parameters:
    ///   - server: the transport server (bind it with `deliverBeforeHandshake: true` for 0.5-RTT catch-up).
    ///   - configuration: identity, floor, burst buffer, membership and wake-hook settings.
    ///   - authenticator: checks each join's credential.
    ///   - wakeSender: the app's push gateway (nil: nobody is woken).
    ///   - events: hears what the relay does (called off the event loops; keep it quick).
    public convenience init(
        server: TransportServer, configuration: Configuration, authenticator: @escaping Authenticator,
        wakeSender: (any WakeSender)? = nil, events: (@Sendable (TalkGroupEvent) -> Void)? = nil
    ) {
        self.init(
            server: server, configuration: configuration, admission: .waiting(authenticator), wakeSender: wakeSender,
            events: events)
    }

    /// A relay for `server`'s connections whose joins are checked at once (`ImmediateAuthenticator`: a lookup, a
    /// signature check), so a woken phone's first flight is answered without leaving the event loop: when its
    /// join and catch-up arrive in 0-RTT and the transport accepted the early data, the join is recorded and the
    /// first buffered frames are queued, as 0.5-RTT datagrams, in the loop turn that read the flight. (Without a
    /// fleet; a relay in a fleet, a join replacing another connection of the user or moving it between groups,
    /// and a refused check take the usual path through the connection's task.)
    ///
    /// - Parameters:
    ///   - server: the transport server (bind it with `deliverBeforeHandshake: true` for 0.5-RTT catch-up).
    ///   - configuration: identity, floor, burst buffer, membership and wake-hook settings.
    ///   - immediateAuthenticator: checks each join's credential; called on the event loops for 0-RTT joins, so it
    ///     must return at once.
    ///   - wakeSender: the app's push gateway (nil: nobody is woken).
    ///   - events: hears what the relay does (called off the event loops; keep it quick).
    public convenience init(
        server: TransportServer, configuration: Configuration, immediateAuthenticator: @escaping ImmediateAuthenticator,
        wakeSender: (any WakeSender)? = nil, events: (@Sendable (TalkGroupEvent) -> Void)? = nil
    ) {
        self.init(
            server: server, configuration: configuration, admission: .immediate(immediateAuthenticator),
            wakeSender: wakeSender, events: events)
    }

    private init(
        server: TransportServer, configuration: Configuration, admission: Admission, wakeSender: (any WakeSender)?,
        events: (@Sendable (TalkGroupEvent) -> Void)?
    ) {
        self.server = server
        self.configuration = configuration
        self.admission = admission
        dispatch = wakeSender.map { WakeDispatch(sender: $0, policy: configuration.wakeHook) }
        onEvent = events
        state = Locked(
            State(
                roster: MemberRoster(
                    lifetime: configuration.membershipLifetime.nanoseconds,
                    maximumPerGroup: configuration.maximumMembersPerGroup)))
        (notices, noticeQueue) = AsyncStream.makeStream(
            of: (group: String, notice: FloorNotice).self, bufferingPolicy: .unbounded)
        (loopEvents, loopEventQueue) = AsyncStream.makeStream(of: TalkGroupEvent.self, bufferingPolicy: .unbounded)
    }

    deinit {
        noticeQueue.finish()
        loopEventQueue.finish()
        dispatch?.stop()
    }

    /// Serves every connection of the server until it shuts down (or the calling task is cancelled).
    public func run() async {
        let trunks = await startTrunks()  // before the fleet: it publishes the trunk address bound
        startFleet(trunkAddress: trunks?.address.description)
        defer { stopFleet() }
        let floorTask = Task { [self] in for await (group, notice) in notices { floorChanged(group, notice) } }
        let eventTask = Task { [self] in for await event in loopEvents { onEvent?(event) } }
        answerFirstFlightsOnTheLoop()
        let housekeeping = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                expire()
            }
        }
        await server.handleEachConnection { [self] connection in await serve(connection) }
        server.earlyStreams.set(nil)
        await trunks?.stop()
        floorTask.cancel()
        eventTask.cancel()
        housekeeping.cancel()
    }

    // MARK: - Public state

    /// The members of `group`, by identity, with their presence.
    public func members(of group: String) -> [MemberStatus] {
        let now = MonotonicClock.now()
        return state.withLock { $0.roster.members(of: group) }.map { status($0, now: now) }
    }

    /// `user`'s membership, nil when it is no member.
    public func member(_ user: MemberIdentity) -> MemberStatus? {
        let now = MonotonicClock.now()
        return state.withLock { $0.roster.member(user) }.map { status($0, now: now) }
    }

    /// The wake address `user` registered, while the roster holds one.
    func wakeAddress(of user: MemberIdentity) -> WakeAddress? {
        state.withLock { $0.roster.member(user)?.wakeAddress }
    }

    /// The push gateway could not deliver to `user` (the token is dead, e.g. APNs answered 410): the member becomes
    /// `unreachable` and is not woken again until its phone joins with a fresh wake address.
    public func reportUndeliverable(_ user: MemberIdentity) {
        let changed = state.withLock { state -> String? in
            state.roster.undeliverable(user, now: MonotonicClock.now()) ? state.roster.member(user)?.group : nil
        }
        if let changed {
            recordInFleet(user, group: changed, presence: .unreachable)  // and without its dead wake address
            onEvent?(.presence(user: user, group: changed, presence: .unreachable))
        }
    }

    /// The channel of `group`, nil before its first join: its floor, counters and catch-up statistics.
    public func channel(of group: String) -> RelayChannel? { state.withLock { $0.channels[group] } }

    /// The groups with a channel here.
    var channelGroups: [String] { state.withLock { Array($0.channels.keys) } }

    /// What the wake hook did (all zero without a `WakeSender`).
    public var wakeStatistics: WakeStatistics { dispatch?.statistics ?? WakeStatistics() }

    /// What the relay did since it started: floor events by kind, the wake hook, fan-out copies and catch-up frames
    /// over all its groups (a relay's metrics; reading it takes a lock per group).
    public var statistics: TalkGroupStatistics {
        var statistics = floorCounts.withLock { $0 }
        statistics.wake = wakeStatistics
        statistics.wake.handOffLatencies = []  // samples are not counters
        for channel in state.withLock({ Array($0.channels.values) }) {
            statistics.fanOutCopies &+= channel.copiesSent
            statistics.catchUpFrames &+= channel.catchUpStatistics.framesSent
        }
        return statistics
    }

    private func status(_ member: MemberRoster.Member, now: UInt64) -> MemberStatus {
        MemberStatus(
            identity: member.identity, group: member.group, presence: member.presence,
            unchangedFor: .nanoseconds(Int64(clamping: now &- member.since)), wakeAddress: member.wakeAddress)
    }

    // MARK: - Connections

    /// One connection: its streams' requests, then its end.
    private func serve(_ connection: TransportConnection) async {
        let entry = connections.entry(connection)
        defer { connections.remove(connection) }
        let joined = entry.joined
        await withTaskGroup(of: Void.self) { streams in
            for await stream in connection.incomingStreams {
                streams.addTask { [self] in await serve(stream, entry: entry) }
            }
        }
        let reason = try? await connection.closed()
        guard let user = joined.withLock({ $0 }) else { return }
        var clean = false
        if case .peer(0, _)? = reason { clean = true }
        let change = state.withLock { state -> (String, MemberPresence)? in
            if state.sessions[user]?.connection === connection { state.sessions[user] = nil }
            guard
                let presence = state.roster.disconnected(
                    user, connection: connection.id, clean: clean, now: MonotonicClock.now()),
                let group = state.roster.member(user)?.group
            else { return nil }
            return (group, presence)
        }
        if let (group, presence) = change {
            forwardReleaseToHome(group, user: user, reason: .closed)
            recordInFleet(user, group: group, presence: presence)
            onEvent?(.presence(user: user, group: group, presence: presence))
        }
    }

    /// One stream: each message in turn, each answered on it.
    private func serve(_ stream: TransportStream, entry: RelayConnections.Entry) async {
        let outbox = connections.outbox(stream, in: entry)
        let joined = entry.joined
        defer { connections.finish(stream, in: entry) }
        while let message = try? await stream.nextMessage() {
            let request: TalkGroupMessage
            do {
                request = try TalkGroupMessage(decoding: message.bytes)
            } catch {
                refuse(outbox, request: Self.kind(of: message.bytes), error: error, user: joined.withLock { $0 })
                continue
            }
            do {
                try await handle(request, early: message.isEarly, outbox: outbox, joined: joined)
            } catch {
                refuse(
                    outbox, request: request.kind.rawValue, error: error, user: joined.withLock { $0 },
                    group: request.group)
            }
        }
    }

    private func handle(
        _ request: TalkGroupMessage, early: Bool, outbox: StreamOutbox, joined: Locked<MemberIdentity?>
    ) async throws(TransportError) {
        let connection = outbox.connection
        let acceptedEarly = early && EarlyRequests.earlyDataAccepted(connection)
        if !EarlyRequests.actsAtOnce(request, early: early, earlyDataAccepted: acceptedEarly) {
            do { try await connection.waitUntilReady() } catch { return }  // a replay never acts twice
        }
        switch request {
        case .join(let join):
            try await self.join(join, early: early, outbox: outbox)
            joined.withLock { $0 = join.user }
        case .catchUp(let group, let burst, let from):
            let (user, channel) = try member(on: connection, in: group, joined: joined)
            let start = try await channel.catchUp(connection, burst: burst, from: from)
            outbox.send(.catchUpStarted(group: group, burst: start.burst, from: start.from, next: start.next))
            onEvent?(.catchUp(user: user, group: group, burst: start.burst, from: start.from, next: start.next))
        case .requestFloor(let group, let priority, let emergency):
            let (user, channel) = try member(on: connection, in: group, joined: joined)
            let holding = channel.talkerIdentity == user
            if !holding, try forwardFloorRequest(group, user: user, priority: priority, emergency: emergency, outbox) {
                return  // decided by the group's home on another relay
            }
            guard holding || mayGrantInFleet(group) else {
                // Homed at another relay, or the fleet cannot confirm the home: granting here could make a second
                // floor. No resources (TS 24.380 cause #6): the talker asks again.
                outbox.send(.floorDenied(group: group, holder: channel.holderInFleet, cause: .noResources))
                floorCounts.withLock { $0.count(.denied(connection.id, holder: nil, cause: .noResources)) }
                onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
                return
            }
            state.withLock { $0.requestedAt[user] = MonotonicClock.now() }
            let request = FloorRequest(priority: priority, urgency: emergency ? .emergency : .normal)
            switch try await channel.requestFloor(for: connection, request) {
            case .granted:
                // A new grant is told by the floor's notice (with its burst); a repeated request is answered here.
                if holding, let burst = channel.heldBurst?.burst {
                    outbox.send(.floorGranted(group: group, burst: burst))
                }
            case .queued:
                break  // told by the floor's notice, as every later change of its place in line
            case .denied(_, let cause):
                state.withLock { _ = $0.requestedAt.removeValue(forKey: user) }
                outbox.send(.floorDenied(group: group, holder: channel.talkerIdentity, cause: cause))
            }
        case .releaseFloor(let group):
            let (user, channel) = try member(on: connection, in: group, joined: joined)
            channel.releaseFloor(for: connection)
            forwardReleaseToHome(group, user: user, reason: .released)
        case .leave(let group):
            let (user, channel) = try member(on: connection, in: group, joined: joined)
            let left = state.withLock { state -> Bool in
                guard state.roster.leave(user, group: group) != nil else { return false }
                if state.sessions[user]?.connection === connection { state.sessions[user] = nil }
                return true
            }
            await channel.leave(connection)
            joined.withLock { $0 = nil }
            outbox.send(.left(group: group))
            if left {
                forwardReleaseToHome(group, user: user, reason: .left)
                recordInFleet(user, group: group, presence: nil)
                onEvent?(.left(user: user, group: group, expired: false))
            }
        case .joined, .catchUpStarted, .floorGranted, .floorQueued, .floorDenied, .floorTaken, .floorReleased, .left,
            .error:
            throw TransportError(.unknownMessage, "\(request.kind) is a relay's message, not a request")
        }
    }

    /// A join: authenticated, recorded (replacing the user's earlier connection), the connection in its group's
    /// channel, answered with the burst held.
    private func join(
        _ join: TalkGroupMessage.JoinRequest, early: Bool, outbox: StreamOutbox
    ) async throws(TransportError) {
        guard await admission.admits(join) else {
            throw TransportError(
                .unauthenticated, "the credential does not admit \(join.user) to \(join.group); get a fresh one")
        }
        let connection = outbox.connection
        let (channel, joined, replaced, previous) = try state.withLock {
            state throws(TransportError) -> (RelayChannel, MemberRoster.Joined, StreamOutbox?, RelayChannel?) in
            try record(join, outbox: outbox, in: &state)
        }
        if let replaced {
            // Out of its channel first, then closed: from here on only the new connection hears the group.
            for channel in [previous, channel].compactMap({ $0 }) { await channel.leave(replaced.connection) }
            await replaced.connection.close(
                code: replacedCloseCode, reason: "replaced by a newer connection of \(join.user)")
        }
        try await channel.join(connection, as: join.user, role: join.role)
        outbox.send(.joined(group: join.group, user: join.user, current: channel.heldBurst))
        recordInFleet(join.user, group: join.group, presence: .connected)
        onEvent?(.joined(user: join.user, group: join.group, early: early, replaced: joined.replaced != nil))
    }

    /// Records `join` on `outbox`'s connection: the group's channel (made on first use), the roster's member, the
    /// user's session; returns them with the session it replaced and the channel it moved from.
    func record(
        _ join: TalkGroupMessage.JoinRequest, outbox: StreamOutbox, in state: inout State
    ) throws(TransportError) -> (RelayChannel, MemberRoster.Joined, StreamOutbox?, RelayChannel?) {
        let connection = outbox.connection
        let channel = try self.channel(join.group, in: &state)
        let joined = try state.roster.join(
            join.user, group: join.group, wakeAddress: join.wakeAddress, connection: connection.id, role: join.role,
            now: MonotonicClock.now())
        let replaced = state.sessions[join.user].flatMap { $0.connection === connection ? nil : $0 }
        let previous = joined.movedFrom.flatMap { state.channels[$0] }
        state.sessions[join.user] = outbox
        outbox.joined(join)
        return (channel, joined, replaced, previous)
    }

    /// The group's channel, made on first use (at the home, for a member of another relay too).
    func channel(forTrunk group: String) throws(TransportError) -> RelayChannel {
        try state.withLock { state throws(TransportError) in try channel(group, in: &state) }
    }

    private func channel(_ group: String, in state: inout State) throws(TransportError) -> RelayChannel {
        if let channel = state.channels[group] { return channel }
        guard state.channels.count < configuration.maximumGroups else {
            throw TransportError(.noResources, "the relay runs its maximum of \(configuration.maximumGroups) groups")
        }
        let queue = noticeQueue
        let channel = RelayChannel(
            server: server, frameLifetime: configuration.frameLifetime, statistics: nil, floor: configuration.floor,
            liveness: configuration.liveness, burstBuffer: configuration.burstBuffer,
            onFloor: { notice in queue.yield((group, notice)) }, trunk: channelTrunk(group))
        state.channels[group] = channel
        followInFleet(group)
        return channel
    }

    /// The member joined on `connection` and its channel, when it is in `group`.
    func member(
        on connection: TransportConnection, in group: String, joined: Locked<MemberIdentity?>
    ) throws(TransportError) -> (MemberIdentity, RelayChannel) {
        let user = joined.withLock { $0 }
        let channel = state.withLock { state -> RelayChannel? in
            guard let user, let member = state.roster.member(user), member.group == group,
                member.connection == connection.id
            else { return nil }
            return state.channels[group]
        }
        guard let user, let channel else {
            throw TransportError(.notAMember, "this connection has not joined \(group); join first")
        }
        return (user, channel)
    }

    private func refuse(
        _ outbox: StreamOutbox, request: UInt64, error: TransportError, user: MemberIdentity?, group: String? = nil
    ) {
        outbox.send(
            .error(
                request: request, code: TalkGroupErrorCode(error.code) ?? .malformed, message: error.message,
                group: group))
        onEvent?(
            .refused(
                user: user, request: TalkGroupMessage.Kind(rawValue: request).map { "\($0)" } ?? "\(request)",
                error: error))
    }

    /// The type of a message that did not parse (0 when even that is unreadable).
    private static func kind(of bytes: [UInt8]) -> UInt64 { VarInt.decode(bytes, at: 0)?.value ?? 0 }

    // MARK: - Floor, wake, expiry

    /// A floor event of `group`: a grant wakes the suspended members and tells everyone; a release tells everyone.
    private func floorChanged(_ group: String, _ notice: FloorNotice) {
        tellPeers(group, notice)
        let user = notice.update.member
        floorCounts.withLock { $0.count(notice.update.event) }
        switch notice.update.event {
        case .granted:
            let burst = notice.burst ?? 0
            wake(group, burst: burst, talker: user)
            broadcast(in: group) { member in
                member == user
                    ? .floorGranted(group: group, burst: burst) : .floorTaken(group: group, burst: burst, talker: user)
            }
            onEvent?(.floor(group: group, event: "granted", user: user, burst: burst, reason: nil))
        case .released(_, let reason):
            let burst = notice.burst ?? 0
            broadcast(in: group) { _ in .floorReleased(group: group, burst: burst, talker: user, reason: reason) }
            onEvent?(.floor(group: group, event: "released", user: user, burst: burst, reason: reason))
        case .queued(_, let position):
            send(to: user, .floorQueued(group: group, position: UInt64(position)))
            onEvent?(.floor(group: group, event: "queued", user: user, burst: nil, reason: nil))
        case .denied:
            onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
        case .revoked:
            onEvent?(.floor(group: group, event: "revoked", user: user, burst: nil, reason: nil))
        case .talkTimeWarning:
            onEvent?(.floor(group: group, event: "talk-time-warning", user: user, burst: nil, reason: nil))
        }
    }

    /// Sends `message` to `member`, when it is connected.
    func send(to member: MemberIdentity, _ message: TalkGroupMessage) {
        state.withLock { $0.sessions[member] }?.send(message)
    }

    /// Hands the group's members that are not connected to the wake hook, once for `burst`: this relay's, and in a
    /// fleet every relay's, read from the store without waiting (`FleetWake`); the store unreachable or too slow,
    /// the group's last list from the store, else this relay's own — and the store's late answer, when it comes,
    /// wakes the members not handed yet in a second request (a late addition). No member is handed twice a burst.
    func wake(_ group: String, burst: UInt64, talker: MemberIdentity) {
        guard let dispatch else { return }
        let since = state.withLock { $0.requestedAt.removeValue(forKey: talker) } ?? MonotonicClock.now()
        let me = configuration.fleet?.relayName ?? ""
        let onLoop = fleetPresence != nil  // the store's answer comes on the loop: its event goes through the queue
        let handed = Locked<Set<MemberIdentity>>([])  // this burst's members handed to the hook so far
        let handOver: @Sendable (FleetMemberRead.Hand?) -> Void = { [weak self] hand in
            guard let self else { return }
            let (local, connected) = state.withLock { ($0.roster.toWake(in: group), $0.roster.connected(in: group)) }
            let targets = handed.withLock { handed in
                let targets = FleetWake.targets(
                    talker: talker, me: me, local: local, connectedHere: connected, group: group,
                    store: hand?.entries, excluding: handed)
                handed.formUnion(targets.lazy.map(\.identity))
                return targets
            }
            let late = hand?.isLate == true
            if late && targets.isEmpty { return }  // the late answer named nobody new: no second request
            dispatch.enqueue(
                WakeRequest(
                    group: group, burst: burst, talker: talker, relay: configuration.identity, members: targets,
                    isLateAddition: late),
                since: since)
            guard !targets.isEmpty else { return }
            let event = TalkGroupEvent.wake(group: group, burst: burst, members: targets.count)
            if onLoop { loopEventQueue.yield(event) } else { onEvent?(event) }
        }
        guard let fleet = fleetPresence else { return handOver(nil) }
        fleet.members(of: group, hand: handOver)
    }

    /// Sends each connected member of `group` the message `make` gives for it.
    func broadcast(in group: String, _ make: (MemberIdentity) -> TalkGroupMessage) {
        let outboxes = state.withLock { state in
            state.roster.members(of: group).compactMap { member in
                member.presence == .connected ? state.sessions[member.identity].map { (member.identity, $0) } : nil
            }
        }
        for (member, outbox) in outboxes { outbox.send(make(member)) }
    }

    /// Drops memberships past their lifetime and bursts past their retention.
    private func expire() {
        let (gone, channels) = state.withLock { state in
            (state.roster.expire(now: MonotonicClock.now()), Array(state.channels.values))
        }
        for member in gone {
            recordInFleet(member.identity, group: member.group, presence: nil)
            onEvent?(.left(user: member.identity, group: member.group, expired: true))
        }
        for channel in channels { channel.expireHeldBurst() }
    }
}

extension TalkGroupMessage {
    /// The group a message names (every message but `error` without one names one).
    var group: String? {
        switch self {
        case .join(let join): join.group
        case .catchUp(let group, _, _), .requestFloor(let group, _, _), .releaseFloor(let group), .leave(let group),
            .joined(let group, _, _), .catchUpStarted(let group, _, _, _), .floorGranted(let group, _),
            .floorQueued(let group, _), .floorDenied(let group, _, _), .floorTaken(let group, _, _),
            .floorReleased(let group, _, _, _), .left(let group):
            group
        case .error(_, _, _, let group): group
        }
    }
}
