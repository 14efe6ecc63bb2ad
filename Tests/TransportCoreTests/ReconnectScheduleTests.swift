import Testing

@testable import TransportCore

/// The link's reconnect schedule on a virtual clock: gRPC's backoff (growth, cap, jitter bounds, measured from
/// each attempt's start), the immediate retries, the backoff reset after a connection that held, and the errors
/// that stop the link.
@Suite("Reconnect schedule (sans-IO)")
struct ReconnectScheduleTests {
    let second = nanosecondsPerSecond
    let policy = ReconnectSchedule.Policy.grpc
    let t0: UInt64 = 1_000 * nanosecondsPerSecond
    let timeout = TransportError(.handshakeTimeout, "no answer")
    let unreachable = TransportError(.unreachable, "ICMP port unreachable")

    private func retryTime(_ decision: ReconnectSchedule.Decision) -> UInt64? {
        if case .retry(_, let at) = decision { return at }
        return nil
    }

    private func attempt(_ decision: ReconnectSchedule.Decision) -> Int? {
        if case .retry(let attempt, _) = decision { return attempt }
        return nil
    }

    /// Attempts that fail at once, with the jitter sample in the middle (no spread): 1 s, then ×1.6 each time,
    /// capped at the maximum; the attempt number counts up from 1.
    @Test func delaysGrowByTheMultiplierUpToTheCap() {
        var schedule = ReconnectSchedule(policy: policy)
        var now = t0
        var expected = Double(policy.initial)
        var delays: [UInt64] = []
        for number in 1...20 {
            let decision = schedule.failed(unreachable, started: now, now: now, unit: 0.5)
            #expect(attempt(decision) == number)
            let at = try! #require(retryTime(decision))
            delays.append(at - now)
            // Whole nanoseconds each step: within a nanosecond per attempt of the exact product.
            #expect(abs(Double(at - now) - min(expected, Double(policy.maximum))) <= Double(number), "\(number)")
            expected *= policy.multiplier
            now = at
        }
        #expect(delays.first == policy.initial)
        #expect(delays.last == policy.maximum)
        #expect(zip(delays, delays.dropFirst()).allSatisfy { $0 <= $1 }, "never shrinks: \(delays)")
    }

    /// The first delay is the initial backoff exactly; every later one stays within ±jitter of its backoff, and
    /// the extreme samples reach both ends.
    @Test func jitterStaysWithinItsBounds() {
        for unit in [0.0, 0.25, 1.0] {
            var schedule = ReconnectSchedule(policy: policy)
            var now = t0
            for number in 1...30 {
                let backoff = schedule.backoff
                let at = try! #require(retryTime(schedule.failed(unreachable, started: now, now: now, unit: unit)))
                let delay = Double(at - now)
                if number == 1 {
                    #expect(at - now == policy.initial)
                } else {
                    let factor = delay / Double(backoff)
                    #expect(factor >= 1 - policy.jitter - 1e-9 && factor <= 1 + policy.jitter + 1e-9)
                    #expect(abs(factor - (1 + policy.jitter * (2 * unit - 1))) < 1e-9, "unit \(unit)")
                }
                now = at
            }
        }
    }

    /// gRPC measures a retry from the attempt's start: an attempt that spent longer than its backoff failing (a
    /// handshake timeout) is retried at once, a quick failure waits out the rest.
    @Test func theBackoffCountsFromTheAttemptsStart() {
        var schedule = ReconnectSchedule(policy: policy)
        let slow = schedule.failed(timeout, started: t0, now: t0 + 10 * second, unit: 0.5)
        #expect(retryTime(slow) == t0 + 10 * second)
        let started = t0 + 10 * second
        let backoff = schedule.backoff
        let quick = schedule.failed(unreachable, started: started, now: started + second / 10, unit: 0.5)
        #expect(retryTime(quick) == started + backoff)
    }

    /// A stateless reset (the relay restarted) and a network change are retried at once; the backoff still
    /// grows underneath, so the failure after them waits again.
    @Test func aResetOrANetworkChangeIsRetriedAtOnce() {
        var schedule = ReconnectSchedule(policy: policy)
        var now = t0
        for _ in 0..<3 {
            now = retryTime(schedule.failed(unreachable, started: now, now: now, unit: 0.5))!
        }
        let reset = TransportError(.connectionReset, "stateless reset")
        #expect(retryTime(schedule.failed(reset, started: now, now: now, unit: 0.5)) == now)
        schedule.networkChanged()
        #expect(retryTime(schedule.failed(unreachable, started: now, now: now, unit: 0.5)) == now)
        let backoff = schedule.backoff
        #expect(backoff > policy.initial)
        #expect(retryTime(schedule.failed(unreachable, started: now, now: now, unit: 0.5)) == now + backoff)
    }

    /// A ready connection lost to a network change or a stateless reset is retried at once without growing the
    /// backoff, however short its life: an app that moves between networks often is not punished for it.
    @Test func aReadyConnectionLostToAResetOrANetworkChangeDoesNotGrowTheBackoff() {
        var schedule = ReconnectSchedule(policy: policy)
        var now = t0
        for round in 0..<20 {
            schedule.connected(now: now)
            now += second / 10
            if round.isMultiple(of: 2) {
                schedule.networkChanged()
                #expect(retryTime(schedule.failed(unreachable, started: 0, now: now, unit: 0.5)) == now)
            } else {
                let reset = TransportError(.connectionReset, "stateless reset")
                #expect(retryTime(schedule.failed(reset, started: 0, now: now, unit: 0.5)) == now)
            }
            #expect(schedule.backoff == policy.initial)
        }
    }

    /// A connection that held for at least the initial backoff resets the schedule: its loss is retried after
    /// the initial backoff (with jitter, counted from the loss) and the attempts count from 1 again. One that
    /// died at once keeps the backoff growing, so a relay that drops every client straight away is not
    /// hammered.
    @Test func aConnectionThatHeldResetsTheBackoffOneThatDiedAtOnceDoesNot() {
        var schedule = ReconnectSchedule(policy: policy)
        var now = t0
        for _ in 0..<5 { now = retryTime(schedule.failed(unreachable, started: now, now: now, unit: 0.5))! }
        schedule.connected(now: now)
        let lost = TransportError(.idleTimeout, "idle")
        let afterHold = schedule.failed(lost, started: 0, now: now + 60 * second, unit: 0.5)
        #expect(attempt(afterHold) == 1)
        #expect(retryTime(afterHold) == now + 60 * second + policy.initial)

        for _ in 0..<5 { now = retryTime(schedule.failed(unreachable, started: now, now: now, unit: 0.5))! }
        let grownAgain = schedule.backoff
        #expect(grownAgain > policy.initial)
        schedule.connected(now: now)
        let kicked = TransportError(.closedByPeer, "go away", applicationErrorCode: 7)
        let afterKick = schedule.failed(kicked, started: 0, now: now + second / 10, unit: 0.5)
        #expect(attempt(afterKick) == 1)
        #expect(retryTime(afterKick) == now + second / 10 + grownAgain)
    }

    /// What retrying cannot fix stops the link; everything a relay restart, a dead path or a busy relay causes
    /// is retried.
    @Test func onlyErrorsARetryCanFixAreRetried() {
        let final: [TransportError.Code] = [
            .certificateUntrusted, .certificateNameMismatch, .certificateExpired, .certificateInvalid,
            .alpnMismatch, .tlsFailure, .invalidConfiguration, .messageTooLarge, .messageEmpty, .cancelled,
        ]
        let retryable: [TransportError.Code] = [
            .handshakeTimeout, .idleTimeout, .closedByPeer, .connectionReset, .connectionClosed,
            .protocolViolation, .unreachable, .connectionRefused, .systemCallFailed, .internalError,
        ]
        for code in final {
            var schedule = ReconnectSchedule(policy: policy)
            #expect(schedule.failed(TransportError(code, "x"), started: t0, now: t0, unit: 0.5) == .stop, "\(code)")
            #expect(!ReconnectSchedule.isRetryable(TransportError(code, "x")))
        }
        for code in retryable {
            var schedule = ReconnectSchedule(policy: policy)
            let decision = schedule.failed(TransportError(code, "x"), started: t0, now: t0, unit: 0.5)
            #expect(attempt(decision) == 1, "\(code)")
        }
    }

    /// Parameters that cannot make a schedule are named, so the link stops with a clear configuration error.
    @Test func badParametersAreRefusedWithAReason() {
        #expect(ReconnectSchedule.Policy.grpc.problem == nil)
        let bad: [ReconnectSchedule.Policy] = [
            .init(initial: 0, multiplier: 1.6, jitter: 0.2, maximum: second),
            .init(initial: 2 * second, multiplier: 1.6, jitter: 0.2, maximum: second),
            .init(initial: second, multiplier: 0.5, jitter: 0.2, maximum: 2 * second),
            .init(initial: second, multiplier: .nan, jitter: 0.2, maximum: 2 * second),
            .init(initial: second, multiplier: 1.6, jitter: 1, maximum: 2 * second),
            .init(initial: second, multiplier: 1.6, jitter: -0.1, maximum: 2 * second),
        ]
        for policy in bad { #expect(policy.problem != nil, "\(policy)") }
    }
}
