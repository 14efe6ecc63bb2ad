/// When a long-lived client link tries again after a failure, and whether it tries at all: capped exponential
/// backoff with jitter after gRPC's connection-backoff rules, and the line between errors a retry can fix and
/// errors it cannot. Sans-IO: time (nanoseconds on any monotonic clock) and randomness come from the caller, so
/// the schedule runs on a virtual clock in tests.
///
/// The rules, with the defaults (initial 1 s, multiplier 1.6, jitter ±20 %, maximum 120 s):
/// - A failed attempt is retried `backoff` after it *started* (gRPC measures from the attempt's start, so a
///   handshake that timed out after longer than the backoff is retried at once); the backoff then grows by the
///   multiplier up to the maximum, and each later delay is the backoff ± jitter.
/// - A connection that was ready and then died is retried after the initial backoff (±jitter), and the backoff
///   starts over — unless it was ready for less than the initial backoff: a relay that accepts and then drops the
///   client at once keeps the backoff growing rather than being hammered every second.
/// - The retry after `networkChanged()` or a stateless reset (the relay restarted and no longer knows the
///   connection) is immediate: either says that a new attempt has a fresh chance now. A ready connection lost
///   that way does not grow the backoff (no attempt failed); a failed attempt still does.
/// - Certificate, name, ALPN, TLS-version and configuration errors stop the link: trying again cannot fix them.
package struct ReconnectSchedule: Sendable {
    /// The backoff parameters (gRPC's names and defaults).
    package struct Policy: Hashable, Sendable {
        /// The delay before the first retry, in nanoseconds (gRPC: 1 s).
        package var initial: UInt64 = 1_000_000_000
        /// How much the delay grows after each failed attempt (gRPC: 1.6).
        package var multiplier = 1.6
        /// The relative spread applied to each delay after the first: 0.2 is ±20 % (gRPC's).
        package var jitter = 0.2
        /// The largest backoff (before jitter), in nanoseconds (gRPC: 120 s).
        package var maximum: UInt64 = 120_000_000_000

        /// gRPC's defaults: 1 s, ×1.6, ±20 %, at most 120 s. Copy it and set properties to change them.
        package static let grpc = Policy()

        /// Why these parameters cannot make a schedule, or nil when they can.
        package var problem: String? {
            if initial == 0 { return "the initial backoff must be positive" }
            if maximum < initial { return "the maximum backoff must not be below the initial one" }
            if !(multiplier >= 1 && multiplier <= 100) { return "the multiplier must be between 1 and 100" }
            if !(jitter >= 0 && jitter < 1) { return "the jitter must be at least 0 and below 1" }
            return nil
        }
    }

    /// What to do after a failure.
    package enum Decision: Hashable, Sendable {
        /// Try again at `at` (same clock as the `now` given); `attempt` counts the retries since the link was
        /// last ready, from 1.
        case retry(attempt: Int, at: UInt64)
        /// Stop: retrying cannot fix this error.
        case stop
    }

    package let policy: Policy
    /// Retries since the link was last ready (0 while ready or before the first failure).
    package private(set) var attempt = 0
    /// The backoff for the next failed attempt, in nanoseconds, before jitter.
    package private(set) var backoff: UInt64
    private var readySince: UInt64?
    private var retryAtOnce = false

    package init(policy: Policy = .grpc) {
        self.policy = policy
        self.backoff = policy.initial
    }

    /// The link became ready at `now`.
    package mutating func connected(now: UInt64) {
        readySince = now
        attempt = 0
    }

    /// The device's network changed: the next retry (or the one already scheduled) may go at once.
    package mutating func networkChanged() { retryAtOnce = true }

    /// An attempt that started at `started` failed, or the ready connection was lost (`started` is then ignored),
    /// with `error` at `now`. `unit` is a uniform random sample in 0...1 for the jitter.
    package mutating func failed(_ error: TransportError, started: UInt64, now: UInt64, unit: Double) -> Decision {
        guard Self.isRetryable(error) else { return .stop }
        attempt += 1
        let immediate = retryAtOnce || error.code == .connectionReset
        retryAtOnce = false
        let delay: UInt64
        let from: UInt64
        if let ready = readySince {
            readySince = nil
            // A connection that stayed up a while proves the path: start the backoff over.
            if now &- ready >= policy.initial { backoff = policy.initial }
            // Lost to a reset or a network change: nothing failed, so the backoff does not grow.
            if immediate { return .retry(attempt: attempt, at: now) }
            delay = jittered(backoff, unit: unit)
            from = now
        } else {
            // gRPC: the first delay is the initial backoff as is; later ones are jittered.
            delay = attempt == 1 && backoff == policy.initial ? backoff : jittered(backoff, unit: unit)
            from = started
        }
        backoff = min(policy.maximum, UInt64(min(Double(policy.maximum), Double(backoff) * policy.multiplier)))
        if immediate { return .retry(attempt: attempt, at: now) }
        return .retry(attempt: attempt, at: max(now, from &+ delay))
    }

    private func jittered(_ value: UInt64, unit: Double) -> UInt64 {
        let spread = policy.jitter * (2 * min(1, max(0, unit)) - 1)
        return UInt64(max(0, Double(value) * (1 + spread)))
    }

    /// Whether trying again can fix `error`. Certificate, name, ALPN and other TLS failures, a configuration
    /// error, an invalid message and a cancellation cannot; a timeout, a reset, an unreachable or refusing relay,
    /// a peer's close, a protocol error (a relay restarted mid-way) or a failed system call (out of descriptors
    /// now, maybe not later) can.
    package static func isRetryable(_ error: TransportError) -> Bool {
        !finalCodes.contains(error.code)
    }

    private static let finalCodes: Set<TransportError.Code> = [
        .certificateUntrusted, .certificateNameMismatch, .certificateExpired, .certificateInvalid, .alpnMismatch,
        .tlsFailure, .invalidConfiguration, .messageEmpty, .messageTooLarge, .cancelled,
    ]
}
