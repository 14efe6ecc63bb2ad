import PTTTransport
import TransportCore
import TransportIO

/// One channel's `FloorArbiter`, shared by the channel's loops: the state is read under a lock per frame (one
/// talker or none, channel-wide), events are yielded under the same lock (so `floorEvents` has them in the order they
/// happened), and the talker's idle timer runs on the loop the talker lives on. With a burst buffer, each grant
/// starts a burst and each release ends it, in the same step.
final class ChannelFloor: Sendable {
    /// What the application reads.
    let events: AsyncStream<FloorEvent>
    private let continuation: AsyncStream<FloorEvent>.Continuation
    private let state: Locked<(arbiter: FloorArbiter, burst: UInt64?)>
    /// The channel's members on each loop, by slot, to arm the talker's idle timer there (set once by the channel).
    private let cores = Locked<[WeakChannelMembers]>([])
    /// The channel's burst buffer, whose bursts follow the grants.
    private let burst: ChannelBurst?
    /// Hears every event with identities and bursts, under the lock, in order (it must return at once).
    private let observer: (@Sendable (FloorNotice) -> Void)?

    init(_ control: FloorControl, burst: ChannelBurst? = nil, observer: (@Sendable (FloorNotice) -> Void)? = nil) {
        state = Locked((FloorArbiter(control), nil))
        self.burst = burst
        self.observer = observer
        (events, continuation) = AsyncStream.makeStream(of: FloorEvent.self, bufferingPolicy: .bufferingNewest(4096))
    }

    deinit { continuation.finish() }

    /// Links the floor to the channel's members on each loop (index = slot).
    func attach(_ members: [ChannelMembers]) {
        cores.withLock { $0 = members.map(WeakChannelMembers.init) }
    }

    /// Runs one step of the floor: yields its events (starting and ending bursts) and arms a new talker's idle
    /// timer.
    func update<Result>(_ step: (inout FloorArbiter) -> Result) -> Result {
        let (result, armed) = state.withLock { state -> (Result, (slot: Int, deadline: UInt64)?) in
            let grants = state.arbiter.grants
            let result = step(&state.arbiter)
            let records = state.arbiter.takeRecords()
            let now = records.isEmpty ? 0 : MonotonicClock.now()
            for record in records {
                continuation.yield(record.event)
                var burstID: UInt64?
                switch record.event {
                case .granted:
                    burstID = burst?.start(talker: record.member, now: now)
                    state.burst = burstID
                case .released:
                    burst?.end(now: now)
                    burstID = state.burst
                    state.burst = nil
                default: break
                }
                observer?(FloorNotice(record: record, burst: burstID))
            }
            guard state.arbiter.grants != grants, let talker = state.arbiter.holder,
                let deadline = state.arbiter.idleDeadline
            else {
                return (result, nil)
            }
            return (result, (talker.slot, deadline))
        }
        if let armed, let core = cores.withLock({ $0.indices.contains(armed.slot) ? $0[armed.slot].members : nil }) {
            core.loop.execute { core.armFloorTimer(at: armed.deadline) }
        }
        return result
    }

    /// Any thread: whether a frame from `member` at `now` is forwarded (it holds the floor); counts it otherwise.
    func admit(_ member: TransportConnection.ID, now: UInt64) -> Bool {
        state.withLock { $0.arbiter.admit(member, now: now) }
    }

    /// A floor timer fired on loop `slot` at `now`: frees an idle floor; returns when to fire again on this loop (the
    /// talker lives here and has sent audio since).
    func timerFired(slot: Int, now: UInt64) -> UInt64? {
        update { arbiter in
            let next = arbiter.expire(now: now)
            return arbiter.holder?.slot == slot ? next : nil
        }
    }

    /// The talker now.
    var holder: TransportConnection.ID? { state.withLock { $0.arbiter.holder?.id } }

    /// The talker now, with its identity, and its burst (nil without a burst buffer).
    var talker: (member: MemberIdentity, burst: UInt64?)? {
        state.withLock { state in state.arbiter.holderIdentity.map { ($0, state.burst) } }
    }

    /// Frames refused so far.
    var framesRefused: UInt64 { state.withLock { $0.arbiter.framesRefused } }
}

/// A floor event with the identities it names and, with a burst buffer, the burst a grant started or a release
/// ended.
struct FloorNotice: Sendable {
    let record: FloorArbiter.Record
    let burst: UInt64?
}
