import PTTTalkGroups
import PTTTransport
import Testing

/// The floor's state machine on a virtual clock (nanoseconds passed in): grants, denials, the queue, releases,
/// revocation, the idle release, and members leaving, each with the `FloorEvent`s it produced.
@Suite("Floor arbiter")
struct FloorArbiterTests {
    typealias ID = TransportConnection.ID
    static let second: UInt64 = 1_000_000_000

    /// Three members on two loops.
    let a = FloorArbiter.Claimant(id: ID.next(), slot: 0)
    let b = FloorArbiter.Claimant(id: ID.next(), slot: 1)
    let c = FloorArbiter.Claimant(id: ID.next(), slot: 0)

    @Test func refusePolicyGrantsTheIdleFloorAndDeniesWhileItIsTaken() {
        let floor = Floor(FloorControl(policy: .refuse))
        #expect(floor.request(a, now: 0) == .granted)
        #expect(floor.request(a, now: 1) == .granted, "asking again changes nothing")
        #expect(floor.request(b, now: 2) == .denied(holder: a.id))
        #expect(floor.takeEvents() == [.granted(a.id), .denied(b.id, holder: a.id)])
        #expect(floor.admit(a.id, now: 3) && !floor.admit(b.id, now: 3) && !floor.admit(c.id, now: 4))
        #expect(floor.framesRefused == 2)
        #expect(floor.release(a.id, reason: .released, now: 5))
        #expect(floor.holder == nil && floor.idleDeadline == nil)
        #expect(!floor.release(a.id, reason: .released, now: 6), "a second release finds nothing")
        #expect(floor.request(b, now: 7) == .granted)
        #expect(floor.takeEvents() == [.released(a.id, reason: .released), .granted(b.id)])
    }

    @Test func queuePolicyLinesMembersUpToItsLimitAndGrantsTheFirstWhenTheFloorFrees() {
        let floor = Floor(FloorControl(policy: .queue(limit: 1)))
        #expect(floor.request(a, now: 0) == .granted)
        #expect(floor.request(b, now: 1) == .queued(position: 1))
        #expect(floor.request(b, now: 2) == .queued(position: 1), "asking again tells the place, no new event")
        #expect(floor.request(c, now: 3) == .denied(holder: a.id), "the line is full")
        #expect(floor.takeEvents() == [.granted(a.id), .queued(b.id, position: 1), .denied(c.id, holder: a.id)])
        #expect(floor.release(a.id, reason: .released, now: 4))
        #expect(floor.holder == b)
        #expect(floor.takeEvents() == [.released(a.id, reason: .released), .granted(b.id)])
        #expect(floor.admit(b.id, now: 5) && !floor.admit(a.id, now: 5))
    }

    @Test func aWaitingMemberThatGivesUpOrLeavesLosesItsPlaceQuietly() {
        let floor = Floor(FloorControl(policy: .queue(limit: 4)))
        _ = floor.request(a, now: 0)
        _ = floor.request(b, now: 0)
        #expect(floor.request(c, now: 0) == .queued(position: 2))
        _ = floor.takeEvents()
        #expect(floor.release(b.id, reason: .left, now: 1), "b waited: it leaves the line")
        #expect(floor.queue == [c])
        #expect(floor.request(c, now: 2) == .queued(position: 1), "c moved up")
        #expect(floor.takeEvents() == [], "leaving the line is no floor event")
        #expect(floor.release(a.id, reason: .closed, now: 3))
        #expect(floor.takeEvents() == [.released(a.id, reason: .closed), .granted(c.id)])
    }

    @Test func revokeTakesTheFloorAndHandsItToTheFirstWaiting() {
        let floor = Floor(FloorControl(policy: .queue(limit: 2)))
        #expect(floor.revoke(now: 0) == nil, "nothing to revoke on an idle floor")
        _ = floor.request(a, now: 0)
        _ = floor.request(b, now: 0)
        _ = floor.takeEvents()
        #expect(floor.revoke(now: 1) == a.id)
        #expect(floor.takeEvents() == [.released(a.id, reason: .revoked), .granted(b.id)])
        #expect(floor.revoke(now: 2) == b.id)
        #expect(floor.takeEvents() == [.released(b.id, reason: .revoked)])
        #expect(floor.holder == nil)
    }

    @Test func theFloorFallsIdleAfterIdleReleaseWithoutAudioCountedFromTheGrantThenFromTheLastFrame() {
        let floor = Floor(FloorControl(policy: .queue(limit: 2), idleRelease: .milliseconds(500)))
        let half = Self.second / 2
        _ = floor.request(a, now: 10 * Self.second)
        _ = floor.request(b, now: 10 * Self.second)
        #expect(floor.idleDeadline == 10 * Self.second + half, "from the grant until the first frame")
        #expect(floor.expire(now: 10 * Self.second + half - 1) == 10 * Self.second + half, "not yet")
        #expect(floor.admit(a.id, now: 10 * Self.second + 400_000_000))
        #expect(floor.expire(now: 10 * Self.second + half) == 10 * Self.second + 400_000_000 + half, "a frame moved it")
        #expect(floor.holder == a)
        #expect(floor.expire(now: 10 * Self.second + 400_000_000 + half) == nil)
        #expect(floor.holder == b, "idle: the first waiting member is granted")
        #expect(
            floor.takeEvents() == [
                .granted(a.id), .queued(b.id, position: 1), .released(a.id, reason: .idle), .granted(b.id),
            ])
        #expect(floor.idleDeadline == 10 * Self.second + 400_000_000 + 2 * half, "b's idle time counts from its grant")
        #expect(floor.expire(now: 20 * Self.second) == nil)
        #expect(floor.holder == nil && floor.takeEvents() == [.released(b.id, reason: .idle)])
        #expect(floor.expire(now: 30 * Self.second) == nil, "an idle floor has nothing to expire")
    }

    @Test func grantsAreCountedSoTheCallerKnowsToArmTheNewTalkersTimer() {
        let floor = Floor(FloorControl(policy: .queue(limit: 1)))
        #expect(floor.grants == 0)
        _ = floor.request(a, now: 0)
        _ = floor.request(a, now: 1)
        #expect(floor.grants == 1, "a repeated request is no new grant")
        _ = floor.request(b, now: 2)
        _ = floor.revoke(now: 3)
        #expect(floor.grants == 2 && floor.holder == b)
    }

    /// A relay that lost the authority over a floor (its fleet moved the group's home) drops the line, then
    /// revokes: nobody is granted the floor.
    @Test func droppingTheLineBeforeARevokeGrantsNobody() {
        let floor = Floor(FloorControl(policy: .queue(limit: 4)))
        _ = floor.request(a, now: 0)
        _ = floor.request(b, now: 1)
        _ = floor.request(c, now: 2)
        floor.dropQueue()
        #expect(floor.revoke(now: 3) == a.id)
        #expect(floor.holder == nil && floor.queue.isEmpty && floor.grants == 1)
        #expect(!floor.admit(b.id, now: 4))
    }
}

/// The arbiter behind a reference, so that `#expect` can call its mutating steps.
private final class Floor {
    private var arbiter: FloorArbiter

    init(_ control: FloorControl) { arbiter = FloorArbiter(control) }

    var holder: FloorArbiter.Claimant? { arbiter.holder }
    var queue: [FloorArbiter.Claimant] { arbiter.queue }
    var idleDeadline: UInt64? { arbiter.idleDeadline }
    var framesRefused: UInt64 { arbiter.framesRefused }
    var grants: UInt64 { arbiter.grants }
    func takeEvents() -> [FloorEvent] { arbiter.takeEvents() }
    func request(_ claimant: FloorArbiter.Claimant, now: UInt64) -> FloorRequestResult {
        arbiter.request(claimant, now: now)
    }
    @discardableResult
    func release(_ id: TransportConnection.ID, reason: FloorReleaseReason, now: UInt64) -> Bool {
        arbiter.release(id, reason: reason, now: now)
    }
    func revoke(now: UInt64) -> TransportConnection.ID? { arbiter.revoke(now: now) }
    func dropQueue() { arbiter.dropQueue() }
    func admit(_ id: TransportConnection.ID, now: UInt64) -> Bool { arbiter.admit(id, now: now) }
    func expire(now: UInt64) -> UInt64? { arbiter.expire(now: now) }
}
