import PTTTransport
import TransportCore
import TransportIO

/// A relay's presence in the fleet's store, run on one event loop and never waiting there: a heartbeat every
/// `FleetConfiguration.heartbeat` (one script: expire the dead, renew this relay, read the live ones) feeds the
/// `FleetElection`; members are written as `member:USER` → relay, QUIC-LB server ID, group and presence, with
/// expiry, renewed while they stay. Every command goes through the loop's `RedisPipeline`: unreachable, slow or
/// hostile, the store costs a typed error counted in `statistics`, and the relay goes on.
final class FleetPresence: Sendable {
    let configuration: FleetConfiguration
    let loop: EventLoop
    private let serverID: String
    private let election: Locked<FleetElection>
    private let counters = Locked(FleetStatistics())
    private let onChange: @Sendable ([FleetElection.Change], [(name: String, trunk: String)]) -> Void
    /// Hears, on the loop, a member whose entry another relay owns now (it joined there since): the relay forgets it.
    private let onMoved: @Sendable (MemberIdentity, String) -> Void
    /// Loop-confined (touched only on `loop`'s thread): the pipeline, timers and the members to renew.
    private let link: UnsafeTransfer<Link>

    private final class Link {
        var pipeline: RedisPipeline?
        /// A second connection for reading a group's members: a long reply never delays a heartbeat behind it.
        var reads: RedisPipeline?
        let heartbeatTimer = LoopTimer()
        let deadlineTimer = LoopTimer()
        /// The members to renew, by user: their group and entry (nil: they left; the deletion is written once).
        var members: [MemberIdentity: (group: String, value: String?, connected: Bool)] = [:]
        var lastMemberRenewal: UInt64 = 0
        /// A member write failed: all are written again with the next heartbeat.
        var membersDirty = false
        var stopped = false
        /// Each group's last list of members the store gave (for a burst whose read the store misses).
        var cache: FleetMemberCache

        init(memberLifetime: UInt64) { cache = FleetMemberCache(lifetime: memberLifetime) }
    }

    /// A presence for `configuration` on `loop` (it starts with `start(addressBook:)`); `onChange` hears, on the
    /// loop, the followed groups whose role changed, with the live relays and their trunks; `onMoved` a member
    /// (and its group) whose entry another relay owns now.
    init(
        configuration: FleetConfiguration, loop: EventLoop, serverID: [UInt8]?,
        onChange: @escaping @Sendable ([FleetElection.Change], [(name: String, trunk: String)]) -> Void,
        onMoved: @escaping @Sendable (MemberIdentity, String) -> Void = { _, _ in }
    ) {
        self.configuration = configuration
        self.loop = loop
        self.serverID = serverID.map(Hex.string) ?? ""
        election = Locked(
            FleetElection(me: configuration.relayName, lifetime: UInt64(configuration.lifetime.nanoseconds)))
        self.onChange = onChange
        self.onMoved = onMoved
        link = UnsafeTransfer(Link(memberLifetime: UInt64(configuration.memberLifetime.nanoseconds)))
    }

    /// Connects to the store at the addresses `addressBook` resolved (over `tls` for `rediss://`) and starts
    /// heartbeating.
    func start(addressBook: RedisAddressBook, tls: RedisTLS? = nil) {
        loop.execute { [self] in
            let link = link.value
            guard link.pipeline == nil, !link.stopped else { return }
            link.pipeline = RedisPipeline(
                loop: loop, addressBook: addressBook, tls: tls, staleAfter: max(500_000_000, heartbeatNanoseconds * 4),
                maxReplyBytes: 16_384, maxArrayCount: 1 + 2 * FleetView.maximumRelays,
                retryDelays: 10_000_000...heartbeatNanoseconds)
            link.reads = RedisPipeline(
                loop: loop, addressBook: addressBook, tls: tls,
                staleAfter: max(
                    500_000_000, UInt64(configuration.memberReadDeadline.nanoseconds) * 2,
                    UInt64(configuration.lateMemberReadDeadline.nanoseconds) + 500_000_000),
                maxReplyBytes: FleetMembers.maximumReplyBytes, maxArrayCount: 2 * FleetMembers.maximumListed,
                retryDelays: 10_000_000...heartbeatNanoseconds)
            beat()
        }
    }

    /// Deregisters (best effort: one script, not waited for) and stops.
    func stop() {
        loop.execute { [self] in
            let link = link.value
            guard !link.stopped else { return }
            link.stopped = true
            link.heartbeatTimer.cancel(on: loop)
            link.reads = nil
            link.deadlineTimer.cancel(on: loop)
            link.pipeline?.send(
                heartbeat(register: false), deadline: MonotonicClock.now() + 100_000_000, answer: { _ in })
        }
    }

    // MARK: - Any thread

    /// This relay's role for `group` now.
    func role(of group: String) -> FleetElection.Role {
        let now = MonotonicClock.now()
        return election.withLock { $0.role(of: group, now: now) }
    }

    /// Follows `group` (a channel for it exists here): its role changes are reported.
    func follow(_ group: String) -> FleetElection.Role {
        let now = MonotonicClock.now()
        return election.withLock { $0.follow(group, now: now) }
    }

    /// The live relays of the latest view.
    var live: [String] { election.withLock { $0.live } }

    /// What the heartbeats and writes did so far.
    var statistics: FleetStatistics { counters.withLock { $0 } }

    /// Records `user` on this relay, in `group`, with `presence` (nil: it left; its entry is deleted) and the wake
    /// address it registered (`wake=PLATFORM:TOKEN`, the token printable ASCII of at most
    /// `WakeAddress.maximumTokenSize` bytes, checked when it joined: an entry is at most about 1 KiB), and in the
    /// group's index. An entry another relay wrote since is left alone unless `user` is connected here (the relay a
    /// member joined last owns its entry): then `user` is forgotten here (`onMoved`).
    func record(_ user: MemberIdentity, group: String, presence: MemberPresence?, wake: WakeAddress? = nil) {
        let value = presence.map {
            FleetMembers.value(
                relay: configuration.relayName, serverID: serverID, group: group, presence: $0, wake: wake)
        }
        let record = (group: group, value: value, connected: presence == .connected)
        loop.execute { [self] in
            let link = link.value
            link.members[user] = record
            guard let pipeline = link.pipeline, !link.stopped else { return }
            write(user, record, on: pipeline)
        }
    }

    /// Any thread: reads every member of `group` the store holds, across the fleet, for a burst that starts now;
    /// `hand` hears on the loop what the wake hook gets from it (`FleetMemberRead`): the answer when it comes within
    /// `FleetConfiguration.memberReadDeadline`; else at the deadline, or as soon as the read failed, the group's last
    /// list (`FleetMemberCache`) or none; then, once, an answer that came after that, within
    /// `FleetConfiguration.lateMemberReadDeadline`. Never waits.
    func members(of group: String, hand: @escaping @Sendable (FleetMemberRead.Hand) -> Void) {
        let command = FleetMembers.read(prefix: configuration.keyPrefix, group: group)
        let onTime = UInt64(configuration.memberReadDeadline.nanoseconds)
        let late = UInt64(max(configuration.lateMemberReadDeadline, configuration.memberReadDeadline).nanoseconds)
        loop.execute { [self] in
            let link = link.value
            let started = MonotonicClock.now()
            let read = ReadProgress()
            let cached = { link.cache.list(of: group, now: MonotonicClock.now()) }
            let deliver: (FleetMemberRead.Hand?) -> Void = { [weak self] outcome in
                guard let self, let outcome else { return }
                counters.withLock { counters in
                    switch outcome {
                    case .onTime: counters.memberReads += 1
                    case .missed(let list):
                        counters.memberReadsFailed += 1
                        if list != nil { counters.memberReadsCached += 1 }
                    case .late: counters.memberReadsLate += 1
                    }
                }
                hand(outcome)
            }
            guard let reads = link.reads, !link.stopped else {
                return deliver(read.state.answered(nil, cached: cached))
            }
            let timer = loop.makeTimerID()
            loop.schedule(timer: timer, at: started + onTime) { deliver(read.state.deadlinePassed(cached: cached)) }
            reads.send(command, deadline: started + late) { [weak self] reply in
                guard let self else { return }
                loop.cancelTimer(timer)
                var entries: [FleetMembers.Entry]?
                switch reply {
                case .reply(let value):
                    do throws(TransportError) {
                        entries = try FleetMembers.entries(value)
                    } catch {
                        fail(error)
                    }
                case .timedOut, .failed:
                    break
                }
                if let entries { link.cache.store(entries, for: group, now: MonotonicClock.now()) }
                deliver(read.state.answered(entries, cached: cached))
            }
        }
    }

    /// One read's progress, shared by its deadline timer and its answer. Loop-confined.
    private final class ReadProgress {
        var state = FleetMemberRead()
    }

    // MARK: - On the loop

    private var heartbeatNanoseconds: UInt64 { UInt64(configuration.heartbeat.nanoseconds) }

    private func heartbeat(register: Bool) -> [String] {
        FleetView.command(
            prefix: configuration.keyPrefix, relay: configuration.relayName, trunk: configuration.trunkAddress,
            lifetimeMilliseconds: Int64(configuration.lifetime.nanoseconds / 1_000_000), register: register)
    }

    private func beat() {
        let link = link.value
        guard let pipeline = link.pipeline, !link.stopped else { return }
        let sent = MonotonicClock.now()
        link.heartbeatTimer.arm(on: loop, at: sent + heartbeatNanoseconds) { [weak self] in self?.beat() }
        pipeline.send(heartbeat(register: true), deadline: sent + heartbeatNanoseconds * 2) { [weak self] answer in
            self?.answered(answer, sentAt: sent)
        }
        if link.membersDirty || sent >= link.lastMemberRenewal + UInt64(configuration.memberLifetime.nanoseconds) / 3 {
            link.lastMemberRenewal = sent
            link.membersDirty = false
            for (user, record) in link.members { write(user, record, on: pipeline) }
        }
    }

    private func answered(_ answer: RedisPipeline.Answer, sentAt: UInt64) {
        let now = MonotonicClock.now()
        var view: FleetView?
        switch answer {
        case .reply(let reply):
            do throws(TransportError) {
                view = try FleetView(reply)
            } catch {
                fail(error)
            }
        case .timedOut:
            fail(TransportError(.handshakeTimeout, "the fleet's store did not answer a heartbeat in time"))
        case .failed:
            fail(
                TransportError(
                    .unreachable,
                    "the fleet's store is unreachable ("
                        + "\(link.value.pipeline.map { $0.lastError?.message ?? $0.lastFailure ?? "?" } ?? "?"))"))
        }
        let changes = election.withLock { election in
            guard let view else { return election.heartbeatFailed(now: now) }
            return election.viewArrived(view.relays.map(\.name), sentAt: sentAt, registered: view.registered, now: now)
        }
        if view != nil { counters.withLock { $0.heartbeats += 1 } }
        armDeadline(now: now)
        if !changes.isEmpty || view != nil { onChange(changes, view?.relays ?? []) }
    }

    /// Arms a timer for the next time a role changes with no answer (a lease's end, an arrival's wait).
    private func armDeadline(now: UInt64) {
        guard let next = election.withLock({ $0.nextDeadline(now: now) }) else { return }
        link.value.deadlineTimer.arm(on: loop, at: next) { [weak self] in self?.deadlinePassed() }
    }

    private func deadlinePassed() {
        let now = MonotonicClock.now()
        let changes = election.withLock { $0.tick(now: now) }
        armDeadline(now: now)
        if !changes.isEmpty { onChange(changes, []) }
    }

    private func write(
        _ user: MemberIdentity, _ record: (group: String, value: String?, connected: Bool), on pipeline: RedisPipeline
    ) {
        let command = FleetMembers.write(
            prefix: configuration.keyPrefix, relay: configuration.relayName, user: user, group: record.group,
            value: record.value, connected: record.connected,
            lifetimeMilliseconds: Int64(configuration.memberLifetime.nanoseconds / 1_000_000))
        if record.value == nil { link.value.members[user] = nil }  // a member who left is deleted once, not renewed
        pipeline.send(command, deadline: MonotonicClock.now() + heartbeatNanoseconds * 4) { [weak self] answer in
            guard let self else { return }
            switch answer {
            case .reply(.integer(1)): counters.withLock { $0.memberWrites += 1 }
            case .reply(.integer(0)):
                // Another relay owns the entry: the member joined there since. Forgotten here, unless it was
                // recorded again since this write (its answer is an older write's).
                counters.withLock { $0.membersMoved += 1 }
                let link = link.value
                guard let current = link.members[user], current.value == record.value, record.value != nil else {
                    return
                }
                link.members[user] = nil
                onMoved(user, record.group)
            case .reply(let other):
                fail(FleetView.unusable("a member write was answered \(other)"))
            case .timedOut, .failed:
                counters.withLock { $0.memberWritesFailed += 1 }
                link.value.membersDirty = true
            }
        }
    }

    private func fail(_ error: TransportError) {
        counters.withLock {
            $0.failures += 1
            $0.lastError = error
        }
    }
}

/// What a relay's presence in the fleet's store did: heartbeats answered and failed (with the last error), member
/// writes.
public struct FleetStatistics: Sendable {
    /// Heartbeats the store answered with a valid view.
    public var heartbeats: UInt64 = 0
    /// Heartbeats and writes that failed: no answer in time, unreachable, or an answer that is not valid.
    public var failures: UInt64 = 0
    /// The latest failure.
    public var lastError: TransportError?
    /// Member entries written (or deleted).
    public var memberWrites: UInt64 = 0
    /// Member writes the store did not answer.
    public var memberWritesFailed: UInt64 = 0
    /// Member writes refused because another relay owns the entry: the member joined there since, and this relay
    /// forgot it.
    public var membersMoved: UInt64 = 0
    /// Reads of a group's members across the fleet (one per burst at its home) the store answered within
    /// `FleetConfiguration.memberReadDeadline`.
    public var memberReads: UInt64 = 0
    /// Reads of a group's members that failed (unreachable, too slow, or an unusable answer): the burst's wake
    /// named the group's last list (`memberReadsCached`) or only this relay's own members, at once.
    public var memberReadsFailed: UInt64 = 0
    /// Failed reads whose burst was woken from the group's last list the store gave (within `memberLifetime`).
    public var memberReadsCached: UInt64 = 0
    /// Reads the store answered after `FleetConfiguration.memberReadDeadline` (within
    /// `FleetConfiguration.lateMemberReadDeadline`): the members not handed yet went to the hook as a late addition.
    public var memberReadsLate: UInt64 = 0
}
