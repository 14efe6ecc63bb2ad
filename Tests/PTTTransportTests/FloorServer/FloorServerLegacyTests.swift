import PTTTalkGroups
import PTTTransport
import Testing
import TransportCore

/// A `FloorServer` made with `FloorServerConfiguration(FloorControl)` decides as today's `FloorArbiter` does: the
/// same answers, the same `FloorEvent`s (mapped from its notices as `ChannelFloor` will map them), the same holder,
/// queue and refused frames, over seeded random runs. What lets the server replace the arbiter behind `RelayChannel`
/// without changing a `FloorControl` channel's behaviour.
@Suite("Floor server as FloorControl")
struct FloorServerLegacyTests {
    typealias ID = TransportConnection.ID

    @Test func underAFloorControlsConfigurationTheServerDecidesAsTheArbiter() {
        for seed in UInt64(0)..<100 { Self.run(seed: seed) }
    }

    static func run(seed: UInt64) {
        var random = SplitMix64(seed: 0x1E6A_0000 + seed)
        let policy: FloorControl.Policy =
            Bool.random(using: &random) ? .refuse : .queue(limit: Int.random(in: 0...3, using: &random))
        let control = FloorControl(
            policy: policy, idleRelease: .milliseconds(Int64.random(in: 100...2_000, using: &random)))
        var now = ms(1_000)
        var arbiter = FloorArbiter(control)
        var server = FloorServer<ID>(configuration: FloorServerConfiguration(control), now: now)
        let members = (0..<4).map { _ in FloorArbiter.Claimant(id: ID.next(), slot: 0) }
        for member in members { _ = server.join(member.id, now: now) }
        let context = Comment(rawValue: "seed \(seed)")

        for _ in 0..<300 {
            let member = members.randomElement(using: &random)!
            var events: [FloorEvent] = []
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                let answer = arbiter.request(member, now: now)
                let step = server.request(member.id, now: now)
                #expect(answer == Self.answer(for: member.id, server), context)
                events = Self.events(step, server, leftAs: .left)
            case 30..<45:
                let reason = [FloorReleaseReason.released, .left, .closed].randomElement(using: &random)!
                arbiter.release(member.id, reason: reason, now: now)
                if reason == .released {
                    events = Self.events(server.release(member.id, now: now), server, leftAs: reason)
                } else {
                    // Leaving (or a closed connection) ends the membership; the channel's member may join again.
                    events = Self.events(server.leave(member.id, now: now), server, leftAs: reason)
                    _ = server.join(member.id, now: now)
                }
            case 45..<50:
                #expect(arbiter.revoke(now: now) == server.holder, context)
                events = Self.events(server.revoke(now: now), server, leftAs: .left)
            case 50..<80:
                #expect(arbiter.admit(member.id, now: now) == server.receiveMedia(from: member.id, now: now), context)
            default:
                now += ms(UInt64.random(in: 0...1_500, using: &random))
                _ = arbiter.expire(now: now)
                events = Self.events(server.expire(now: now), server, leftAs: .left)
            }
            #expect(arbiter.takeEvents() == events, context)
            #expect(arbiter.holder?.id == server.holder && arbiter.queue.map(\.id) == server.queue, context)
            #expect(arbiter.framesRefused == server.framesRefused, context)
            #expect(arbiter.idleDeadline == server.deadline(of: .endOfMedia), context)
        }
    }

    /// `RelayChannel.requestFloor`'s answer, read from the server after the request.
    static func answer(for member: ID, _ server: FloorServer<ID>) -> FloorRequestResult {
        if server.holder == member { return .granted }
        if let position = server.queuePosition(of: member) { return .queued(position: position) }
        return .denied(holder: server.holder ?? member)
    }

    /// The step's notices as `RelayChannel.floorEvents` reports them; a member leaving reports `leftAs`.
    static func events(
        _ step: FloorServer<ID>.Step, _ server: FloorServer<ID>, leftAs: FloorReleaseReason
    )
        -> [FloorEvent]
    {
        step.notices.compactMap { notice in
            switch notice {
            case .granted(let member, _): .granted(member)
            case .queued(let member, let position): .queued(member, position: position)
            case .denied(let member, _): server.holder.map { .denied(member, holder: $0) }
            case .released(let member, let reason):
                switch reason {
                case .released, .stopTalking: .released(member, reason: .released)
                case .endOfMedia: .released(member, reason: .idle)
                case .preempted, .revoked: .released(member, reason: .revoked)
                case .left: .released(member, reason: leftAs)
                }
            case .inactive, .revokeIgnored: nil
            }
        }
    }
}
