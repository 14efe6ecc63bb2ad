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
    /// Loop-confined (touched only on `loop`'s thread): the pipeline, timers and the members to renew.
    private let link: UnsafeTransfer<Link>

    private final class Link {
        var pipeline: RedisPipeline?
        let heartbeatTimer = LoopTimer()
        let deadlineTimer = LoopTimer()
        var members: [String: String] = [:]
        var lastMemberRenewal: UInt64 = 0
        /// A member write failed: all are written again with the next heartbeat.
        var membersDirty = false
        var stopped = false
    }

    /// A presence for `configuration` on `loop` (it starts with `start(addressBook:)`); `onChange` hears, on the
    /// loop, the followed groups whose role changed, with the live relays and their trunks.
    init(
        configuration: FleetConfiguration, loop: EventLoop, serverID: [UInt8]?,
        onChange: @escaping @Sendable ([FleetElection.Change], [(name: String, trunk: String)]) -> Void
    ) {
        self.configuration = configuration
        self.loop = loop
        self.serverID = serverID.map(Hex.string) ?? ""
        election = Locked(
            FleetElection(me: configuration.relayName, lifetime: UInt64(configuration.lifetime.nanoseconds)))
        self.onChange = onChange
        link = UnsafeTransfer(Link())
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
    /// `WakeAddress.maximumTokenSize` bytes, checked when it joined: an entry is at most about 1 KiB).
    func record(_ user: MemberIdentity, group: String, presence: MemberPresence?, wake: WakeAddress? = nil) {
        let key = configuration.keyPrefix + "member:" + user.description
        let value = presence.map {
            "relay=\(configuration.relayName) sid=\(serverID) group=\(group) presence=\($0)"
                + (wake.map { " wake=\($0.platform):\($0.token)" } ?? "")
        }
        loop.execute { [self] in
            let link = link.value
            link.members[key] = value
            guard let pipeline = link.pipeline, !link.stopped else { return }
            write(key, value, on: pipeline)
        }
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
            for (key, value) in link.members { write(key, value, on: pipeline) }  // a member who left has no entry
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

    private func write(_ key: String, _ value: String?, on pipeline: RedisPipeline) {
        let command =
            value.map { ["SET", key, $0, "PX", String(configuration.memberLifetime.nanoseconds / 1_000_000)] }
            ?? ["DEL", key]
        pipeline.send(command, deadline: MonotonicClock.now() + heartbeatNanoseconds * 4) { [weak self] answer in
            guard let self else { return }
            switch answer {
            case .reply(.simpleString("OK")), .reply(.integer): counters.withLock { $0.memberWrites += 1 }
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
}
