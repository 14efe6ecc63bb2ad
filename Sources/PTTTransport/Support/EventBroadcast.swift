import TransportCore
import TransportIO

/// Events for any number of readers that come and go: every subscription gets every event published after it
/// began, in order, until `finish`. A reader whose task is cancelled ends its own subscription only; a new one
/// begins with the next event. Publishing never waits: each subscription holds up to `capacity` unread events and
/// drops its oldest beyond that (counted in `dropped`).
package final class EventBroadcast<Event: Sendable>: Sendable {
    private struct State {
        var subscribers: [UInt64: Mailbox<Event>] = [:]
        var nextID: UInt64 = 0
        var finished = false
        var dropped: UInt64 = 0
    }

    private let state = Locked(State())
    /// The most unread events one subscription holds.
    package let capacity: Int

    package init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Any thread: hands `event` to every subscription now (ignored after `finish`). Callers that publish from
    /// several threads order their events themselves (a channel's floor publishes under its own lock).
    package func publish(_ event: Event) {
        state.withLock { state in
            guard !state.finished else { return }
            for mailbox in state.subscribers.values where !mailbox.send(event) { state.dropped &+= 1 }
        }
    }

    /// No more events: every subscription yields what it holds, then ends; later ones end at once.
    package func finish() {
        let mailboxes = state.withLock { state -> [Mailbox<Event>] in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for mailbox in mailboxes { mailbox.finish() }
    }

    /// Events dropped so far because a subscription held `capacity` unread ones.
    package var dropped: UInt64 { state.withLock { $0.dropped } }

    /// Subscriptions open now.
    package var subscribers: Int { state.withLock { $0.subscribers.count } }

    /// A new subscription: every event published from now on. It ends when its last reference goes.
    package func subscribe() -> EventSubscription<Event> {
        let mailbox = Mailbox<Event>(capacity: capacity)
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = mailbox
            return state.nextID
        }
        if id == nil { mailbox.finish() }
        return EventSubscription(mailbox: mailbox) { [weak self] in
            guard let self, let id else { return }
            self.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
    }
}

/// One reader's place in an `EventBroadcast`: its unread events. Dropping the last reference unsubscribes.
package final class EventSubscription<Event: Sendable>: Sendable {
    private let mailbox: Mailbox<Event>
    private let unsubscribe: @Sendable () -> Void

    init(mailbox: Mailbox<Event>, unsubscribe: @escaping @Sendable () -> Void) {
        self.mailbox = mailbox
        self.unsubscribe = unsubscribe
    }

    deinit { unsubscribe() }

    /// The next event; nil once the broadcast finished (and the held events were read), or when the waiting task
    /// is cancelled.
    package func next() async -> Event? { await mailbox.next() }
}
