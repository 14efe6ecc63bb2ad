import PTTTransport
import TransportCore
import TransportIO

extension TalkGroupRelay {
    /// This relay's role for `group` in its fleet (nil without `Configuration.fleet`): `home` grants the group's
    /// floor; any other role grants nothing here.
    public func fleetRole(of group: String) -> FleetElection.Role? { fleetPresence?.role(of: group) }

    /// The live relays of the fleet as the store last answered (empty without a fleet or before an answer).
    public var fleetRelays: [String] { fleetPresence?.live ?? [] }

    /// What this relay's heartbeats and member writes did (nil without a fleet).
    public var fleetStatistics: FleetStatistics? { fleetPresence?.statistics }

    var fleetPresence: FleetPresence? { fleet.withLock { $0?.presence } }

    /// Starts the relay's presence in the fleet's store: resolves the store (here, off the loops, and again before
    /// each reconnect, so relays follow a failover that moves the name), then heartbeats on the server's first
    /// loop. Without a usable configuration no presence starts; while the store's name does not resolve or the
    /// store does not answer, the relay grants no floor of any group (it cannot know it is the home).
    func startFleet(trunkAddress: String?) {
        guard var fleetConfiguration = configuration.fleet else { return }
        if let trunkAddress, fleetConfiguration.trunkAddress.isEmpty || fleetConfiguration.trunkAddress.hasSuffix(":0")
        {
            fleetConfiguration.trunkAddress = trunkAddress  // publish what was bound
        }
        let tls: RedisTLS?
        do throws(TransportError) {
            try fleetConfiguration.validate()
            let store = fleetConfiguration.store  // rediss://: verified against its trust (read here, off the loops)
            tls = try store.redisTLS()
        } catch {
            onEvent?(.refused(user: nil, request: "fleet", error: error))
            return
        }
        let (events, queue) = AsyncStream.makeStream(of: TalkGroupEvent.self, bufferingPolicy: .bufferingNewest(1024))
        let known = Locked<[String]>([])
        let presence = FleetPresence(
            configuration: fleetConfiguration, loop: server.loops[0],
            serverID: configuration.identity.quicLBServerID,
            onChange: { [weak self] changed, relays in
                // On the loop, at once: a floor whose home moved is revoked before anything else is granted.
                for change in changed where change.releasesFloor {
                    self?.channel(of: change.group)?.revokeFloorAndLine()
                }
                for change in changed {
                    self?.endRelayedFloor(change.group, reason: .revoked)
                    self?.abandonForwarded(change.group)
                    if case .remote(let home) = change.to { self?.applyStashedTaken(change.group, home: home) }
                }
                if !relays.isEmpty { self?.trunks.withLock({ $0 })?.viewChanged(relays) }
                let names = relays.map(\.name).sorted()
                let changedRelays = known.withLock { known -> Bool in
                    guard !names.isEmpty, known != names else { return false }
                    known = names
                    return true
                }
                if changedRelays { queue.yield(.fleet(relays: names)) }
                for change in changed {
                    queue.yield(
                        .home(
                            group: change.group, role: change.to.description, was: change.from.description,
                            floorReleased: change.releasesFloor))
                }
            },
            onMoved: { [weak self] user, group in self?.memberMoved(user, group: group) })
        fleet.withLock { $0 = (presence, queue) }
        presence.start(
            addressBook: RedisAddressBook(host: fleetConfiguration.store.host, port: fleetConfiguration.store.port),
            tls: tls)
        Task { [weak self] in  // the events callback runs off the loops
            for await event in events { self?.onEvent?(event) }
        }
    }

    /// Stops heartbeating and deregisters (best effort).
    func stopFleet() {
        let fleet = fleet.withLock { $0 }
        fleet?.presence.stop()
        fleet?.events.finish()
    }

    /// A new channel for `group`: its role is followed from now on (and reported, `was` "none").
    func followInFleet(_ group: String) {
        guard let fleet = fleet.withLock({ $0 }) else { return }
        let role = fleet.presence.follow(group)
        trunks.withLock { $0 }?.broadcast(.follow(group: group))
        fleet.events.yield(.home(group: group, role: role.description, was: "none", floorReleased: false))
    }

    /// Whether this relay may grant `group`'s floor: always without a fleet; with one, only as its home.
    func mayGrantInFleet(_ group: String) -> Bool {
        guard configuration.fleet != nil else { return true }
        return fleetPresence?.role(of: group) == .home
    }

    /// Writes `user`'s membership (nil presence: it left) to the fleet's store, with its wake address while the
    /// roster holds one (a dead token is dropped, and so written without).
    func recordInFleet(_ user: MemberIdentity, group: String, presence: MemberPresence?) {
        guard let fleetPresence else { return }
        let wake = presence == nil ? nil : wakeAddress(of: user)
        fleetPresence.record(user, group: group, presence: presence, wake: wake)
    }

    /// `user`, suspended or unreachable here, joined another relay since (that relay owns its entry in the store now):
    /// it is no longer a member here, so this relay neither lists nor wakes it.
    func memberMoved(_ user: MemberIdentity, group: String) {
        state.withLock { state in
            guard let member = state.roster.member(user), member.group == group, member.presence != .connected else {
                return
            }
            state.roster.leave(user, group: group)
        }
    }
}
