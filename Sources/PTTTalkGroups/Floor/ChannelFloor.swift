import PTTTransport
import TransportCore
import TransportIO

/// One channel's `FloorArbiter`, shared by the channel's loops: the state is read under a lock per frame (one
/// talker or none, channel-wide), events are yielded under the same lock (so `floorEvents` has them in the order they
/// happened), and the talker's idle timer runs on the loop the talker lives on.
final class ChannelFloor: Sendable {
    /// What the application reads.
    let events: AsyncStream<FloorEvent>
    private let continuation: AsyncStream<FloorEvent>.Continuation
    private let state: Locked<FloorArbiter>
    /// The channel's members on each loop, by slot, to arm the talker's idle timer there (set once by the channel).
    private let cores = Locked<[WeakChannelMembers]>([])

    init(_ control: FloorControl) {
        state = Locked(FloorArbiter(control))
        (events, continuation) = AsyncStream.makeStream(of: FloorEvent.self, bufferingPolicy: .bufferingNewest(4096))
    }

    deinit { continuation.finish() }

    /// Links the floor to the channel's members on each loop (index = slot).
    func attach(_ members: [ChannelMembers]) {
        cores.withLock { $0 = members.map(WeakChannelMembers.init) }
    }

    /// Runs one step of the floor: yields its events and arms a new talker's idle timer.
    func update<Result>(_ step: (inout FloorArbiter) -> Result) -> Result {
        let (result, armed) = state.withLock { arbiter -> (Result, (slot: Int, deadline: UInt64)?) in
            let grants = arbiter.grants
            let result = step(&arbiter)
            for event in arbiter.takeEvents() { continuation.yield(event) }
            guard arbiter.grants != grants, let talker = arbiter.holder, let deadline = arbiter.idleDeadline else {
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
        state.withLock { $0.admit(member, now: now) }
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
    var holder: TransportConnection.ID? { state.withLock { $0.holder?.id } }

    /// Frames refused so far.
    var framesRefused: UInt64 { state.withLock { $0.framesRefused } }
}
