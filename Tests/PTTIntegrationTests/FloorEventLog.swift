import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// A `RelayChannel`'s floor events as they arrive, each with when it arrived, for tests that wait for one.
final class FloorEventLog: Sendable {
    private let events = Locked<[(event: FloorEvent, at: ContinuousClock.Instant)]>([])
    private let reader: Task<Void, Never>

    init(_ channel: RelayChannel) {
        let stream = channel.floorEvents  // subscribed now: nothing published from here on is missed
        reader = Task { [events] in
            for await event in stream { events.withLock { $0.append((event, .now)) } }
        }
    }

    deinit { reader.cancel() }

    /// Every event so far, in order.
    var all: [FloorEvent] { events.withLock { $0.map(\.event) } }

    /// When `event` arrived, waiting for it up to `limit`; nil when it did not come.
    func instant(of event: FloorEvent, within limit: Duration = .seconds(10)) async throws -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + limit
        while true {
            let past = ContinuousClock.now >= deadline  // read before looking: one last look after the deadline
            if let found = events.withLock({ $0.first { $0.event == event }?.at }) { return found }
            if past { return nil }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The first release of `member`, waiting for it up to `limit`.
    func release(
        of member: TransportConnection.ID, within limit: Duration = .seconds(10)
    ) async throws -> (
        reason: FloorReleaseReason, at: ContinuousClock.Instant
    )? {
        let deadline = ContinuousClock.now + limit
        while true {
            let past = ContinuousClock.now >= deadline  // read before looking: one last look after the deadline
            let found = events.withLock { events in
                events.lazy.compactMap { entry -> (FloorReleaseReason, ContinuousClock.Instant)? in
                    if case .released(member, let reason) = entry.event { return (reason, entry.at) }
                    return nil
                }.first
            }
            if let found { return found }
            if past { return nil }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
