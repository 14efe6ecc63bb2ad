import PTTTransport

/// The floor of one channel as a state machine without I/O or clock of its own: who holds it, since when it has been
/// silent, who waits, and the `FloorEvent`s each step produced. Time is passed in (MonotonicClock nanoseconds), so
/// tests drive it with a virtual clock; `ChannelFloor` runs it under a lock with the loops' real clock.
package struct FloorArbiter {
    /// A member as the floor knows it: its connection, and the index of the loop it lives on (where its idle timer
    /// runs).
    package struct Claimant: Equatable, Sendable {
        package let id: TransportConnection.ID
        package let slot: Int
        /// Who the member is (events name it; its connection's name when it joined without an identity).
        package let member: MemberIdentity

        package init(id: TransportConnection.ID, slot: Int, member: MemberIdentity? = nil) {
            self.id = id
            self.slot = slot
            self.member = member ?? MemberIdentity(anonymous: id)
        }
    }

    /// An event with the identities of the members it names: `member` is its subject (granted, queued, denied,
    /// released), `holder` the floor's holder for a denial.
    package struct Record: Equatable, Sendable {
        package let event: FloorEvent
        package let member: MemberIdentity
        package let holder: MemberIdentity?
    }

    let policy: FloorControl.Policy
    /// `FloorControl.idleRelease` in nanoseconds.
    let idleRelease: UInt64
    /// The talker, nil when the floor is idle.
    package private(set) var holder: Claimant?
    /// The talker's last frame, or its grant until its first frame.
    private var lastAudio: UInt64 = 0
    /// Members waiting, first in line first.
    package private(set) var queue: [Claimant] = []
    /// Frames dropped because their sender did not hold the floor.
    package private(set) var framesRefused: UInt64 = 0
    /// Grants so far: a change tells the caller to arm the new talker's idle timer.
    package private(set) var grants: UInt64 = 0
    /// Events not yet taken, oldest first.
    private var events: [Record] = []

    package init(_ control: FloorControl) {
        policy = control.policy
        idleRelease = max(1_000_000, control.idleRelease.nanoseconds)
    }

    /// When the talker's floor falls idle unless it sends a frame first; nil when the floor is idle.
    package var idleDeadline: UInt64? { holder.map { _ in lastAudio &+ idleRelease } }

    /// The events produced since the last call, in order.
    package mutating func takeEvents() -> [FloorEvent] { takeRecords().map(\.event) }

    /// The events produced since the last call, in order, with the identities they name.
    package mutating func takeRecords() -> [Record] {
        defer { events.removeAll() }
        return events
    }

    /// `claimant` asks for the floor at `now`.
    package mutating func request(_ claimant: Claimant, now: UInt64) -> FloorRequestResult {
        guard let holder else {
            grant(claimant, now: now)
            return .granted
        }
        if holder.id == claimant.id { return .granted }
        if let index = queue.firstIndex(where: { $0.id == claimant.id }) { return .queued(position: index + 1) }
        if case .queue(let limit) = policy, queue.count < limit {
            queue.append(claimant)
            events.append(
                Record(event: .queued(claimant.id, position: queue.count), member: claimant.member, holder: nil))
            return .queued(position: queue.count)
        }
        events.append(
            Record(event: .denied(claimant.id, holder: holder.id), member: claimant.member, holder: holder.member))
        return .denied(holder: holder.id)
    }

    /// `member` gives up the floor (`reason`), or its place in the queue (no event); the first member waiting is
    /// granted a freed floor. Returns whether `member` held the floor or waited.
    @discardableResult
    package mutating func release(_ member: TransportConnection.ID, reason: FloorReleaseReason, now: UInt64) -> Bool {
        if holder?.id == member {
            free(reason: reason, now: now)
            return true
        }
        guard let index = queue.firstIndex(where: { $0.id == member }) else { return false }
        queue.remove(at: index)
        return true
    }

    /// The member holding the floor, with its identity.
    package var holderIdentity: MemberIdentity? { holder?.member }

    /// Forgets every member waiting (no event: they ask again), so a revoke that follows grants nobody.
    package mutating func dropQueue() { queue.removeAll() }

    /// The application takes the floor from its holder, if any; the first member waiting is granted it.
    package mutating func revoke(now: UInt64) -> TransportConnection.ID? {
        guard let holder else { return nil }
        free(reason: .revoked, now: now)
        return holder.id
    }

    /// A frame from `member` at `now`: true when it holds the floor (the frame is forwarded), else the frame is
    /// counted as refused.
    package mutating func admit(_ member: TransportConnection.ID, now: UInt64) -> Bool {
        if holder?.id == member {
            lastAudio = now
            return true
        }
        framesRefused &+= 1
        return false
    }

    /// Frees the floor of a talker silent for `idleRelease` at `now`. Returns the deadline to check again at when
    /// the talker is still within it.
    package mutating func expire(now: UInt64) -> UInt64? {
        guard let deadline = idleDeadline else { return nil }
        guard now >= deadline else { return deadline }
        free(reason: .idle, now: now)
        return nil
    }

    private mutating func free(reason: FloorReleaseReason, now: UInt64) {
        guard let talker = holder else { return }
        holder = nil
        events.append(Record(event: .released(talker.id, reason: reason), member: talker.member, holder: nil))
        if !queue.isEmpty { grant(queue.removeFirst(), now: now) }
    }

    private mutating func grant(_ claimant: Claimant, now: UInt64) {
        holder = claimant
        lastAudio = now
        grants &+= 1
        events.append(Record(event: .granted(claimant.id), member: claimant.member, holder: nil))
    }
}
