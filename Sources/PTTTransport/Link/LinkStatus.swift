/// Where a `TransportLink` stands, in a form an app maps one to one onto PushToTalk's service status
/// (`PTChannelManager.setServiceStatus`): `connecting` and `reconnecting` are `.connecting`, `ready` is `.ready`,
/// `stopped` is `.unavailable`. `suspended` is the app's own doing (it called `suspend()`): report `.connecting`
/// if the system asks, as the link connects again on `wake(pending:)`.
public enum LinkStatus: Hashable, Sendable, CustomStringConvertible {
    /// An attempt to connect is under way (the first one, or a retry).
    case connecting
    /// A connection is up: `TransportLink.connection` is it.
    case ready
    /// The connection died or an attempt failed, for `reason`; the link tries again at `nextRetryAt`. `attempt`
    /// counts the retries since the link was last ready, from 1.
    case reconnecting(attempt: Int, nextRetryAt: ContinuousClock.Instant, reason: TransportError)
    /// `suspend()` closed the connection; the link waits for `wake(pending:)`.
    case suspended
    /// The link ended; this is always the last status. The error says why (retrying could not fix it, or
    /// `connectionClosed` when the link's last reference was released), nil when the app called `stop()`.
    case stopped(TransportError?)

    /// `connecting`, `ready`, `reconnecting (attempt 2, in 1.43 s: <reason>)`, `suspended`, `stopped` or
    /// `stopped (<error>)`.
    public var description: String {
        switch self {
        case .connecting: return "connecting"
        case .ready: return "ready"
        case .reconnecting(let attempt, let at, let reason):
            let centiseconds = Int(max(0, (at - ContinuousClock.now) / .milliseconds(10)))
            return "reconnecting (attempt \(attempt), in \(Double(centiseconds) / 100) s: \(reason))"
        case .suspended: return "suspended"
        case .stopped(let error?): return "stopped (\(error))"
        case .stopped(nil): return "stopped"
        }
    }
}

/// The statuses of a `TransportLink`: every iterator is its own subscription that starts with the current status
/// and sees every change after it, up to and including `.stopped` (an iterator made after the stop yields
/// `.stopped` once, then ends).
public struct LinkStatusUpdates: AsyncSequence, Sendable {
    /// A link status.
    public typealias Element = LinkStatus
    let base: ValueBroadcast<LinkStatus>

    /// One subscription to the status.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<LinkStatus>.AsyncIterator
        /// The next status; nil after `.stopped`, or when the iterating task is cancelled.
        public mutating func next() async -> LinkStatus? { await base.next() }
    }

    /// Subscribes: the first element is the current status.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.subscribe().makeAsyncIterator()) }
}
