import PTTTalkGroups

typealias NamedFloor = FloorServer<String>

/// Milliseconds in the server's nanoseconds.
func ms(_ milliseconds: UInt64) -> UInt64 { milliseconds * 1_000_000 }

/// A `FloorServer` keyed by names on a virtual clock: each input runs at `now`; `advance` moves the clock and fires
/// every timer due on the way at its deadline, as an event loop armed at `nextDeadline` would. No sleeps, no sockets.
final class FloorBed {
    private(set) var server: NamedFloor
    private(set) var now: UInt64

    /// A server with `configuration` at 1 s (so "before the start" stays representable), and `members` joined.
    init(_ configuration: FloorServerConfiguration = FloorServerConfiguration(), members: [String] = []) {
        now = ms(1_000)
        server = NamedFloor(configuration: configuration, now: now)
        for member in members { _ = join(member) }
    }

    var state: NamedFloor.State { server.state }
    var holder: String? { server.holder }
    var queue: [String] { server.queue }

    func join(_ member: String, role: FloorRole = .transmitAndReceive) -> NamedFloor.Step {
        server.join(member, role: role, now: now)
    }
    func leave(_ member: String) -> NamedFloor.Step { server.leave(member, now: now) }
    func request(_ member: String, _ request: FloorRequest = FloorRequest()) -> NamedFloor.Step {
        server.request(member, request, now: now)
    }
    func release(_ member: String) -> NamedFloor.Step { server.release(member, now: now) }
    func queuePositionRequest(_ member: String) -> NamedFloor.Step { server.queuePositionRequest(member, now: now) }
    func revoke(_ cause: FloorRevokeCause = .other) -> NamedFloor.Step { server.revoke(cause: cause, now: now) }
    func setResources(available: Bool) -> NamedFloor.Step { server.setResources(available: available, now: now) }
    func setCallType(_ type: FloorCallType) { server.setCallType(type) }
    func frame(_ member: String) -> Bool { server.receiveMedia(from: member, now: now) }
    func deadline(of timer: NamedFloor.Timer) -> UInt64? { server.deadline(of: timer) }
    func state(of member: String) -> NamedFloor.ParticipantState? { server.participantState(of: member) }

    /// Moves the clock `milliseconds` on, firing each timer due on the way at its deadline; every step that fired
    /// something, merged in order.
    @discardableResult
    func advance(_ milliseconds: UInt64) -> NamedFloor.Step {
        advance(to: now + ms(milliseconds))
    }

    @discardableResult
    func advance(to target: UInt64) -> NamedFloor.Step {
        var merged = NamedFloor.Step()
        while let deadline = server.nextDeadline, deadline <= target {
            now = max(now, deadline)
            let step = server.expire(now: now)
            merged.messages += step.messages
            merged.notices += step.notices
        }
        now = max(now, target)
        merged.nextDeadline = server.nextDeadline
        return merged
    }

    /// `senders` each send a frame every 20 ms for `milliseconds`, timers firing on the way; the merged steps and
    /// how many frames of each sender were forwarded.
    func talk(_ senders: [String], for milliseconds: UInt64) -> (step: NamedFloor.Step, forwarded: [String: Int]) {
        var merged = NamedFloor.Step()
        var forwarded: [String: Int] = [:]
        let end = now + ms(milliseconds)
        while now + ms(20) <= end {
            let step = advance(20)
            merged.messages += step.messages
            merged.notices += step.notices
            for sender in senders where frame(sender) { forwarded[sender, default: 0] += 1 }
        }
        merged.nextDeadline = server.nextDeadline
        return (merged, forwarded)
    }
}

extension NamedFloor.Delivery {
    /// Shorthand for building expected deliveries.
    static func to(_ member: String, _ message: NamedFloor.Message) -> NamedFloor.Delivery {
        NamedFloor.Delivery(member, message)
    }
}
