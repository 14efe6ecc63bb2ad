import PTTTransport
import TransportCore
import TransportIO

/// One loop's share of a channel's catch-ups: the members on that loop being replayed the buffered burst, each sent
/// up to `framesPerTick` frames every 10 ms (the first batch at once, so a 0-RTT request is answered in the relay's
/// first flight), until it reaches the burst's newest frame and hears the rest live.
///
/// Paced below live audio: live frames are forwarded as they arrive, the replay runs in timer turns between them,
/// at most `loopBudget` frames per tick per loop, and never more than `maximumBacklog` frames waiting in a member's
/// connection (so a congestion window or QUIC's 3× limit before the phone's address is validated holds the
/// replay back instead of dropping it).
///
/// Loop-confined: every method runs on `owner.loop`'s thread (it is part of `ChannelMembers`).
final class CatchUpPacer {
    static let tick: UInt64 = 10_000_000
    static let loopBudget = 512
    static let maximumBacklog = 32
    /// How long a replayed frame may wait in its connection's queue before it is dropped (the pacer keeps the
    /// queue short, so only a stalled path reaches this).
    static let frameLifetime: UInt64 = 2_000_000_000

    private let burst: ChannelBurst
    private let perTick: Int
    private let counters: CatchUpCounters
    private var replaying: [(connection: TransportConnection, membership: ChannelMembership, started: UInt64)] = []
    private let timer = LoopTimer()
    private var armed = false
    /// Where the next tick starts, so no member is always served last.
    private var rotation = 0

    init(burst: ChannelBurst, counters: CatchUpCounters) {
        self.burst = burst
        perTick = max(1, burst.policy.framesPerTick)
        self.counters = counters
    }

    /// Replays `start` to `membership`'s member from now on (replacing a replay under way), its first frames at
    /// once.
    func start(
        _ connection: TransportConnection, _ membership: ChannelMembership, at start: CatchUpStart,
        on owner: ChannelMembers
    ) {
        membership.catchUp = (start.burst, start.from)
        membership.liveFrom = nil
        replaying.removeAll { $0.membership === membership }
        let now = MonotonicClock.now()
        counters.started()
        var budget = Self.loopBudget
        let entry = (connection, membership, now)
        if !pace(entry, budget: &budget, now: now, owner: owner, first: true) {
            replaying.append(entry)
            arm(owner)
        }
    }

    /// Sends `entry` its next frames; true when its replay is over (caught up, left, or the burst is gone).
    private func pace(
        _ entry: (connection: TransportConnection, membership: ChannelMembership, started: UInt64),
        budget: inout Int, now: UInt64, owner: ChannelMembers, first: Bool = false
    ) -> Bool {
        let membership = entry.membership
        guard membership.channel === owner, let cursor = membership.catchUp else { return true }
        let room = Self.maximumBacklog - entry.connection.backend.datagramBacklog
        let limit = min(perTick, room, budget)
        guard limit > 0 else { return false }
        let (frames, next, caughtUp, held) = burst.frames(burst: cursor.burst, from: cursor.next, limit: limit)
        guard held else {
            membership.catchUp = nil
            return true
        }
        let early = entry.connection.status == .connecting
        for frame in frames {
            try? entry.connection.backend.sendDatagram(frame, deadline: now &+ Self.frameLifetime)
        }
        budget -= frames.count
        counters.sent(frames.count, beforeHandshake: early)
        if first && early && !frames.isEmpty {
            counters.firstFrame(after: now &- entry.connection.backend.createdAt)
        }
        if caughtUp {
            membership.catchUp = nil
            membership.liveFrom = (cursor.burst, next)
            counters.caughtUp(after: now &- entry.started)
            return true
        }
        membership.catchUp = (cursor.burst, next)
        return false
    }

    private func tickFired(_ owner: ChannelMembers) {
        armed = false
        let now = MonotonicClock.now()
        var budget = Self.loopBudget
        let count = replaying.count
        guard count > 0 else { return }
        rotation = (rotation + 1) % count
        var finished = Set<ObjectIdentifier>()
        for offset in 0..<count where budget > 0 {
            let entry = replaying[(rotation + offset) % count]
            if pace(entry, budget: &budget, now: now, owner: owner) {
                finished.insert(ObjectIdentifier(entry.membership))
            }
        }
        if !finished.isEmpty { replaying.removeAll { finished.contains(ObjectIdentifier($0.membership)) } }
        if !replaying.isEmpty { arm(owner) }
    }

    private func arm(_ owner: ChannelMembers) {
        guard !armed else { return }
        armed = true
        timer.arm(on: owner.loop, at: MonotonicClock.now() &+ Self.tick) { [weak self, weak owner] in
            if let self, let owner { self.tickFired(owner) }
        }
    }

    /// Stops the timer and forgets every replay (the channel emptied).
    func stop(on loop: EventLoop) {
        for entry in replaying { entry.membership.catchUp = nil }
        replaying.removeAll()
        timer.cancel(on: loop)
        armed = false
    }
}

/// What a channel's catch-ups did, across its loops (`RelayChannel.catchUpStatistics`).
public struct CatchUpStatistics: Hashable, Sendable {
    /// Catch-ups started.
    public var started: UInt64 = 0
    /// Of those, catch-ups started on the event loop in the turn that read the member's 0-RTT first flight (its
    /// join and catch-up acted on without a hop to a task: a relay with an `ImmediateAuthenticator`).
    public var startedInFirstFlightTurn: UInt64 = 0
    /// Catch-ups that reached the burst's newest frame (the member went live).
    public var caughtUp: UInt64 = 0
    /// Buffered frames sent to catching-up members.
    public var framesSent: UInt64 = 0
    /// Of those, frames sent while the member's handshake was still under way (0.5-RTT answers to a 0-RTT
    /// catch-up).
    public var framesSentBeforeHandshake: UInt64 = 0
    /// For each catch-up that went live (oldest first, at most 10,000 kept): its start to its last buffered frame.
    public var timesToLive: [Duration] = []
    /// For each catch-up answered at 0.5-RTT (oldest first, at most 10,000 kept): from the loop turn its member's
    /// first flight arrived to its first replayed frame queued (the relay's share of a woken member's first audio:
    /// the anti-replay claim, the join, the catch-up request and the hops between the loop and the relay's tasks).
    public var firstFrameDelays: [Duration] = []

    /// All zero.
    public init() {}
}

/// A channel's `CatchUpStatistics`, written by its loops.
final class CatchUpCounters: Sendable {
    private let state = Locked(CatchUpStatistics())

    func started() { state.withLock { $0.started &+= 1 } }

    func startedInFirstFlightTurn() { state.withLock { $0.startedInFirstFlightTurn &+= 1 } }

    func sent(_ frames: Int, beforeHandshake: Bool) {
        guard frames > 0 else { return }
        state.withLock { state in
            state.framesSent &+= UInt64(frames)
            if beforeHandshake { state.framesSentBeforeHandshake &+= UInt64(frames) }
        }
    }

    func firstFrame(after nanoseconds: UInt64) {
        state.withLock { state in
            if state.firstFrameDelays.count < 10_000 {
                state.firstFrameDelays.append(.nanoseconds(Int64(clamping: nanoseconds)))
            }
        }
    }

    func caughtUp(after nanoseconds: UInt64) {
        state.withLock { state in
            state.caughtUp &+= 1
            if state.timesToLive.count < 10_000 {
                state.timesToLive.append(.nanoseconds(Int64(clamping: nanoseconds)))
            }
        }
    }

    var snapshot: CatchUpStatistics { state.withLock { $0 } }
}
