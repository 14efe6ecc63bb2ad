import PTTTransport
import TransportCore
import TransportIO

extension TalkGroupRelay {
    /// What this relay's trunks did (nil without `Configuration.trunk` or before `run` started them).
    public var trunkStatistics: TrunkStatistics? { trunks.withLock { $0 }?.counters.withLock { $0 } }

    /// The relays this one has a proven trunk to now, sorted.
    public var trunkPeers: [String] { (trunks.withLock { $0 }?.peers.keys).map { $0.sorted() } ?? [] }

    /// Where the trunk listener is bound (nil without trunks or before `run` started them).
    public var trunkAddress: ServerAddress? { trunks.withLock { $0 }?.address }

    /// Replaces the fleet secret the trunks prove and admit (`previous`: the one being retired, during a rotation),
    /// e.g. when the files it is derived from were replaced (`serve` does it on SIGHUP): the trunks up now carry on,
    /// and every trunk dialed or accepted from now proves these — with `previous`, a relay still on it is admitted
    /// and dialed as before.
    ///
    /// - Throws: `invalidConfiguration` for a secret that is not 32 bytes, or when the relay runs no trunks (yet):
    ///   nothing changes.
    public func replaceTrunkSecret(_ secret: [UInt8], previous: [UInt8]?) throws(TransportError) {
        guard let trunks = trunks.withLock({ $0 }) else {
            throw TransportError(.invalidConfiguration, "this relay runs no trunks (yet): no trunk secret to replace")
        }
        try trunks.replaceSecrets(secret, previous: previous)
    }

    /// Binds the trunk listener on the server's first loop, or accepts trunks on the server's own listener
    /// (`TrunkConfiguration.sharesRelayListener`), with `Configuration.trunk` and a fleet; trunks that cannot start
    /// are reported (`refused`, request "trunk") and the relay runs without them.
    func startTrunks() async -> RelayTrunks? {
        guard let trunk = configuration.trunk, let fleet = configuration.fleet else { return nil }
        let handlers = RelayTrunks.Handlers(
            up: { [weak self] peer in self?.trunkUp(peer) },
            down: { [weak self] peer in self?.trunkDown(peer) },
            message: { [weak self] peer, message in self?.trunkMessage(message, from: peer) },
            frame: { [weak self] _, group, frame in self?.channel(of: group)?.receiveRelayed(frame) ?? false },
            event: { [weak self] peer, state, reason in self?.onEvent?(.trunk(peer: peer, state: state, reason: reason))
            })
        do {
            let trunks =
                trunk.sharesRelayListener
                ? try RelayTrunks.start(
                    configuration: trunk, me: fleet.relayName, grace: fleet.lifetime * 2, on: server,
                    handlers: handlers)
                : try await RelayTrunks.start(
                    configuration: trunk, me: fleet.relayName, grace: fleet.lifetime * 2, loop: server.loops[0],
                    handlers: handlers)
            self.trunks.withLock { $0 = trunks }
            return trunks
        } catch {
            let typed =
                error as? TransportError ?? TransportError(.invalidConfiguration, "the trunk listener: \(error)")
            onEvent?(.refused(user: nil, request: "trunk", error: typed))
            return nil
        }
    }

    /// The trunk side of a new channel for `group` (nil without trunks configured).
    func channelTrunk(_ group: String) -> ChannelTrunk? {
        guard configuration.trunk != nil, configuration.fleet != nil else { return nil }
        let trunks = trunks
        return ChannelTrunk { frame in trunks.withLock { $0 }?.forward(group: group, frame: frame) }
    }

    // MARK: - A member here, the home elsewhere

    /// A member's floor request for a group homed at another relay with a trunk up: sent to the home with the
    /// member's identity and role, and the home's floor decides — a receive-only member is denied there (#5), like
    /// every other cause, once for every member of the fleet; the decision comes back on the trunk. False when this
    /// relay decides (it is the home, or no trunk reaches the home: then it denies as before). A member already
    /// granted by the home is answered at once.
    ///
    /// A home of the first trunk revision reads no role and would seat a receive-only member as a talker: for such
    /// a home alone (during a rolling upgrade) this relay still denies a receive-only member itself.
    func forwardFloorRequest(
        _ group: String, user: MemberIdentity, priority: UInt8, emergency: Bool, _ outbox: StreamOutbox
    ) throws(TransportError) -> Bool {
        guard let trunks = trunks.withLock({ $0 }), case .remote(let home)? = fleetPresence?.role(of: group),
            let peer = trunks.peer(home)
        else { return false }
        let role = state.withLock { $0.roster.member(user)?.role } ?? .transmitAndReceive
        if role == .receiveOnly, peer.revision < 2 {
            outbox.send(.floorDenied(group: group, holder: channel(of: group)?.holderInFleet, cause: .receiveOnly))
            onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
            return true
        }
        if let relayed = channel(of: group)?.trunk?.relayed, relayed.talker == user {
            outbox.send(.floorGranted(group: group, burst: relayed.burst))
            return true
        }
        channel(of: group)?.trunk?.asked(user, home: home)
        peer.send(.floorRequest(group: group, user: user, role: role, priority: priority, emergency: emergency))
        trunks.counters.withLock { $0.floorRequestsForwarded &+= 1 }
        onEvent?(.floor(group: group, event: "forwarded", user: user, burst: nil, reason: nil))
        return true
    }

    /// `user` released the floor or its place in line, left or disconnected: the home elsewhere is told, and a
    /// floor the home granted `user` ends here at once (a request right after must not be answered with it).
    func forwardReleaseToHome(_ group: String, user: MemberIdentity, reason: FloorReleaseReason) {
        guard let trunks = trunks.withLock({ $0 }), case .remote(let home)? = fleetPresence?.role(of: group) else {
            return
        }
        channel(of: group)?.trunk?.answered(user)
        if channel(of: group)?.trunk?.relayed?.talker == user { endRelayedFloor(group, reason: reason) }
        trunks.peer(home)?.send(.floorRelease(group: group, user: user))
    }

    /// The home `home` (nil: whichever) of `group` will not decide its pending requests from here (it moved, or
    /// its trunk broke): those members are denied (no resources, #6) and ask again, of the home there is now.
    func abandonForwarded(_ group: String, home: String? = nil) {
        let holder = channel(of: group)?.holderInFleet
        for user in channel(of: group)?.trunk?.abandon(home: home) ?? [] {
            send(to: user, .floorDenied(group: group, holder: holder, cause: .noResources))
            onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
        }
    }

    /// The floor the home granted for `group` ends here (the home moved, or its trunk went down): the members here
    /// are told it was released.
    func endRelayedFloor(_ group: String, reason: FloorReleaseReason, home: String? = nil) {
        guard let channel = channel(of: group), let relayed = channel.trunk?.relayed,
            home == nil || relayed.home == home, let ended = channel.relayedReleased(burst: relayed.burst)
        else { return }
        relayedReleased(group, ended, reason: reason)
    }

    private func relayedReleased(_ group: String, _ ended: ChannelTrunk.Relayed, reason: FloorReleaseReason) {
        broadcast(in: group) { _ in
            .floorReleased(group: group, burst: ended.burst, talker: ended.talker, reason: reason)
        }
        onEvent?(.floor(group: group, event: "released", user: ended.talker, burst: ended.burst, reason: reason))
    }

    // MARK: - The home here

    /// A floor event of `group` here: as its home, the peers that follow the group hear grants and releases, and a
    /// member of another relay hears its place in line.
    func tellPeers(_ group: String, _ notice: FloorNotice) {
        guard let trunks = trunks.withLock({ $0 }) else { return }
        let user = notice.update.member
        let message: TrunkMessage
        switch notice.update.event {
        case .granted:
            message = .floorTaken(group: group, burst: notice.burst ?? 0, talker: user)
        case .released(_, let reason):
            message = .floorReleased(group: group, burst: notice.burst ?? 0, talker: user, reason: reason)
        case .queued(_, let position):
            if let seat = channel(of: group)?.trunk?.remoteSeat(of: user) {
                trunks.peer(seat.relay)?.send(.floorQueued(group: group, user: user, position: UInt64(position)))
            }
            return
        default:
            return
        }
        for peer in trunks.peers.values where peer.follows(group) { peer.send(message) }
    }

    // MARK: - Trunk messages

    private func trunkUp(_ peer: TrunkPeer) {
        for group in channelGroups { peer.send(.follow(group: group)) }
    }

    private func trunkDown(_ peer: TrunkPeer) {
        for group in channelGroups {
            channel(of: group)?.dropSeats(of: peer.name)
            endRelayedFloor(group, reason: .revoked, home: peer.name)
            abandonForwarded(group, home: peer.name)
        }
    }

    private func trunkMessage(_ message: TrunkMessage, from peer: TrunkPeer) {
        switch message {
        case .follow(let group):
            _ = peer.following.withLock { $0.insert(group) }
        case .unfollow(let group):
            _ = peer.following.withLock { $0.remove(group) }
        case .floorRequest(let group, let user, let role, let priority, let emergency):
            decideForPeer(group, user: user, role: role, priority: priority, emergency: emergency, peer: peer)
        case .floorRelease(let group, let user):
            channel(of: group)?.releaseFloor(remote: user)
        case .floorTaken(let group, let burst, let talker):
            guard let channel = channel(of: group) else { return }
            guard fleetPresence?.role(of: group) == .remote(peer.name) else {
                // The home moved to `peer` and this relay's view has not followed yet: kept until it does.
                channel.trunk?.stash(ChannelTrunk.Relayed(talker: talker, burst: burst, home: peer.name))
                return
            }
            applyTaken(group, channel, burst: burst, talker: talker, home: peer.name)
        case .floorReleased(let group, let burst, _, let reason):
            guard let channel = channel(of: group) else { return }
            channel.trunk?.unstash(burst: burst)
            guard let ended = channel.relayedReleased(burst: burst) else { return }
            relayedReleased(group, ended, reason: reason)
        case .floorQueued(let group, let user, let position):
            send(to: user, .floorQueued(group: group, position: position))
            onEvent?(.floor(group: group, event: "queued", user: user, burst: nil, reason: nil))
        case .floorDenied(let group, let user, let holder, let cause):
            channel(of: group)?.trunk?.answered(user)
            send(to: user, .floorDenied(group: group, holder: holder, cause: cause))
            onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
        case .hello, .challenge, .proof, .welcome:
            break  // the proof is done; a repeat changes nothing
        }
    }

    /// The home `home` granted `talker` the floor for `burst`: its frames are admitted here, the members told.
    private func applyTaken(
        _ group: String, _ channel: RelayChannel, burst: UInt64, talker: MemberIdentity, home: String
    ) {
        let previous = channel.trunk?.relayed
        channel.relayedTaken(burst: burst, talker: talker, home: home)
        channel.trunk?.answered(talker)
        guard previous?.burst != burst else { return }  // a repeated grant
        // No wake here: the home that granted it hands its hook every member of the group across the fleet, once.
        broadcast(in: group) { member in
            member == talker
                ? .floorGranted(group: group, burst: burst) : .floorTaken(group: group, burst: burst, talker: talker)
        }
        onEvent?(.floor(group: group, event: "granted", user: talker, burst: burst, reason: nil))
    }

    /// `group`'s home is now `home` in this relay's view: a grant it sent before the view followed takes effect.
    func applyStashedTaken(_ group: String, home: String) {
        guard let channel = channel(of: group), let taken = channel.trunk?.unstash(home: home) else { return }
        applyTaken(group, channel, burst: taken.burst, talker: taken.talker, home: home)
    }

    /// As the home: a member of `peer`, `user` in `role`, asks for the floor; the decision goes back on the trunk (a
    /// grant, and every later change, through the floor's notices; a denial naming the real holder, or none).
    private func decideForPeer(
        _ group: String, user: MemberIdentity, role: FloorRole, priority: UInt8, emergency: Bool, peer: TrunkPeer
    ) {
        guard mayGrantInFleet(group), let channel = try? channel(forTrunk: group) else {
            // Not the home by this relay's view (or no room for the group): no resources (#6), ask again.
            let holder = self.channel(of: group)?.holderInFleet
            peer.send(.floorDenied(group: group, user: user, holder: holder, cause: .noResources))
            onEvent?(.floor(group: group, event: "denied", user: user, burst: nil, reason: nil))
            return
        }
        _ = peer.following.withLock { $0.insert(group) }
        trunks.withLock { $0 }?.counters.withLock { $0.floorRequestsDecided &+= 1 }
        let holding = channel.talkerIdentity == user
        if !holding { state.withLock { $0.requestedAt[user] = MonotonicClock.now() } }  // the wake hook's latency
        let request = FloorRequest(priority: priority, urgency: emergency ? .emergency : .normal)
        switch channel.requestFloor(remote: user, of: peer.name, role: role, request) {
        case .granted?:
            if holding, let burst = channel.heldBurst?.burst {
                peer.send(.floorTaken(group: group, burst: burst, talker: user))
            }
        case .queued?, nil:
            break
        case .denied(_, let cause)?:
            state.withLock { _ = $0.requestedAt.removeValue(forKey: user) }
            peer.send(.floorDenied(group: group, user: user, holder: channel.talkerIdentity, cause: cause))
        }
    }
}
