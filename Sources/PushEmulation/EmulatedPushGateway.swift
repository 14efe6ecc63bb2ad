import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore

/// A push gateway for the bench and the tests: a `WakeSender` that delivers each member's wake — the request's
/// `WakeTicket` — to the handler registered for that user after a delay drawn from `PushDelay` (by default
/// log-normal, mean 800 ms, p95 2 s, seeded). It records when each request was handed over and each push delivered.
/// Lab code: never in a relay.
public final class EmulatedPushGateway: WakeSender {
    /// One push.
    public struct Delivery: Sendable {
        /// To whom.
        public var user: MemberIdentity
        /// For which burst.
        public var burst: UInt64
        /// When the relay handed the request to the gateway.
        public var handedAt: ContinuousClock.Instant
        /// The delay drawn.
        public var delay: Duration
        /// When the handler was called (nil until then, or when no handler was registered for the user).
        public var deliveredAt: ContinuousClock.Instant?
    }

    /// The distribution delays are drawn from.
    public let delays: PushDelay
    private let state: Locked<State>

    private struct State {
        var random: SeededRandom
        var handlers: [MemberIdentity: @Sendable (WakeTicket) -> Void] = [:]
        var deliveries: [Delivery] = []
        var requests: [(request: WakeRequest, at: ContinuousClock.Instant)] = []
    }

    /// A gateway drawing delays from `delays` with a generator seeded with `seed`.
    public init(delays: PushDelay = PushDelay(), seed: UInt64 = 1) {
        self.delays = delays
        state = Locked(State(random: SeededRandom(seed: seed)))
    }

    /// Wakes for `user` are delivered to `handler` (called on a task of its own with the ticket).
    public func register(_ user: MemberIdentity, _ handler: @escaping @Sendable (WakeTicket) -> Void) {
        state.withLock { $0.handlers[user] = handler }
    }

    /// Schedules one push per member; returns at once (as a real gateway returns once it handed the pushes over).
    public func wake(_ request: WakeRequest) async throws {
        let handed = ContinuousClock.now
        let ticket = request.ticket
        let scheduled = state.withLock { state -> [(Int, Duration, (@Sendable (WakeTicket) -> Void)?)] in
            state.requests.append((request, handed))
            return request.members.map { member in
                let delay = delays.sample(&state.random)
                state.deliveries.append(
                    Delivery(user: member.identity, burst: request.burst, handedAt: handed, delay: delay))
                return (state.deliveries.count - 1, delay, state.handlers[member.identity])
            }
        }
        for (index, delay, handler) in scheduled {
            guard let handler else { continue }
            Task { [state] in
                try? await Task.sleep(until: handed.advanced(by: delay))
                state.withLock { $0.deliveries[index].deliveredAt = .now }
                handler(ticket)
            }
        }
    }

    /// Every push so far, in the order they were scheduled.
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    /// Every request handed over so far, with when.
    public var requests: [(request: WakeRequest, at: ContinuousClock.Instant)] { state.withLock { $0.requests } }
}
