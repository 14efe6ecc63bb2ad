import TransportCore
import TransportIO

/// A connection a link made, numbered by the attempt that made it.
struct LinkConnection: Sendable {
    let id: UInt64
    let connection: TransportConnection
}

/// Early messages `wake(pending:)` handed to the next attempt.
struct PendingMessages: Sendable {
    let token: UInt64
    let messages: [EarlyMessage]
}

/// Everything the link's task and its callers share, under one lock.
struct LinkState: Sendable, ChangeWatched {
    var schedule: ReconnectSchedule
    var connection: LinkConnection?
    var saved: ResumptionState?
    var loaded = false
    var pending: [PendingMessages] = []
    var nextToken: UInt64 = 0
    /// The number of the latest attempt started.
    var attempts: UInt64 = 0
    var suspended = false
    var stopped = false
    var stopError: TransportError?
    /// `networkChanged()` was called and the task has not acted on it yet.
    var networkChanged = false
    /// `wake(pending:)` asks the task to stop waiting for its next retry.
    var wakeRequested = false
    var changeWaiters = ChangeWaiters()
    /// The request channel of the current connection, opened by the first `request` on it.
    var requests: LinkRequests?
    /// The relay address (`remoteAddress`) whose connection died on its own (timed out, went silent, was closed
    /// or reset): the next attempts try every other address of the name before it. Nil after a network change.
    var deadRelay: String?
}

/// The task behind a `TransportLink`: connect, watch, decide, wait, again. The schedule decides (sans-IO); this
/// type only runs it against the real clock and the real client.
final class LinkEngine: Sendable {
    let client: TransportClient
    let address: ServerAddress
    /// The rejoin messages of the next connection, asked for before each attempt.
    let rejoin: @Sendable () -> [EarlyMessage]
    let store: ResumptionStore
    let state: Locked<LinkState>
    let statuses = ValueBroadcast<LinkStatus>(buffering: .unbounded)
    /// Datagrams in from every connection, out on the ready one.
    let datagramPath: LinkDatagramPath
    /// The relay's pushes from every connection.
    let noticePath = LinkNoticePath()
    private let task = Locked<Task<Void, Never>?>(nil)

    init(
        client: TransportClient, address: ServerAddress, rejoin: @escaping @Sendable () -> [EarlyMessage],
        store: ResumptionStore,
        policy: ReconnectSchedule.Policy
    ) {
        self.client = client
        self.address = address
        self.rejoin = rejoin
        self.store = store
        self.state = Locked(LinkState(schedule: ReconnectSchedule(policy: policy)))
        self.datagramPath = LinkDatagramPath(capacity: client.configuration.datagramReceiveBuffer)
    }

    func start() {
        statuses.publish(.connecting)
        if let problem = state.withLock({ $0.schedule.policy.problem }) {
            end(TransportError(.invalidConfiguration, "the reconnect backoff is invalid: \(problem)"))
            return
        }
        let running = Task { [self] in await run() }
        task.withLock { $0 = running }
    }

    // MARK: - Commands

    func networkChanged() {
        state.changeAndWake { $0.networkChanged = true }
    }

    func suspend() async {
        // Saved first, while the connection is still up (the link closes it as soon as it is marked suspended).
        if let connection = state.withLock({ $0.stopped ? nil : $0.connection?.connection }) {
            await saveNewestState(of: connection)
        }
        let current = state.changeAndWake { state -> LinkConnection? in
            guard !state.stopped else { return nil }
            state.suspended = true
            defer { state.connection = nil }
            return state.connection
        }
        if state.withLock({ !$0.stopped }) { statuses.publish(.suspended) }
        await current?.connection.close(code: 0, reason: "suspended")
    }

    /// Saves `connection`'s newest resumption state before a suspension closes it, so the next process wakes
    /// resumed: a suspension right after the handshake waits for the relay's first ticket (it follows the
    /// handshake within a round trip), at most `firstStateWait`.
    private func saveNewestState(of connection: TransportConnection) async {
        // The current state at once when there is one (a ticket came already), else the first within the wait.
        guard let newest = await connection.firstResumptionState(within: Self.firstStateWait) else { return }
        store.save(newest)
        state.withLock { $0.saved = newest }
    }

    /// How long a suspension waits for a connection's first resumption state.
    static let firstStateWait: Duration = .seconds(1)

    func stop() { end(nil) }

    /// The link's last reference went: it stops, saying so (an app that forgot to keep it learns why it ended).
    func released() {
        end(
            TransportError(
                .connectionClosed,
                "the last reference to the TransportLink was released, so it stopped; keep a reference for as long "
                    + "as the link should run, and call stop() to end it"))
    }

    /// The close reason the relay sees after `stop()`.
    static let stoppedReason = "link stopped"

    /// Ends the link once: closes its connection and publishes `.stopped(error)` as the last status.
    private func end(_ error: TransportError?) {
        let (current, first) = state.changeAndWake { state -> (LinkConnection?, Bool) in
            guard !state.stopped else { return (nil, false) }
            state.stopped = true
            state.stopError = error
            state.requests = nil
            defer { state.connection = nil }
            return (state.connection, true)
        }
        guard first else { return }
        if let current { Task { await current.connection.close(code: 0, reason: Self.stoppedReason) } }
        datagramPath.finish()
        noticePath.finish()
        statuses.finish(with: .stopped(error))
    }

    func nextReady(minimumID: UInt64) async throws -> LinkConnection {
        while true {
            let (answer, generation) = state.withLock { state -> (Result<LinkConnection, TransportError>?, UInt64) in
                if let error = stoppedError(state) { return (.failure(error), 0) }
                // After networkChanged() the current connection is about to be closed and replaced: not handed out.
                if let current = state.connection, !state.networkChanged, current.id >= minimumID,
                    current.connection.status == .ready
                {
                    return (.success(current), 0)
                }
                return (nil, state.changeWaiters.generation)
            }
            if let answer { return try answer.get() }
            await state.waitForChange(after: generation)
            try Task.checkCancellation()
        }
    }

    func wake(pending: [EarlyMessage]) async throws -> TransportStream? {
        let (ready, token, target) = state.changeAndWake {
            state -> (LinkConnection?, UInt64, UInt64) in
            state.suspended = false
            if let current = state.connection, !state.networkChanged, current.connection.status == .ready {
                return (current, 0, 0)
            }
            state.wakeRequested = true
            state.nextToken += 1
            if !pending.isEmpty { state.pending.append(PendingMessages(token: state.nextToken, messages: pending)) }
            return (nil, state.nextToken, state.attempts + 1)
        }
        if let ready { return try await send(pending, on: ready.connection) }
        var minimum: UInt64 = 0
        while true {
            let current = try await nextReady(minimumID: minimum)
            // With nothing pending, the attempt under way when the wake came will do (waiting for a newer one
            // would wait for the next failure).
            if current.id >= target || pending.isEmpty {
                return current.connection.earlyStream  // nil when neither rejoin nor pending messages went
            }
            // An attempt that started before this wake won: take the messages back and send them on it.
            let mine = state.withLock { state -> [EarlyMessage]? in
                guard let index = state.pending.firstIndex(where: { $0.token == token }) else { return nil }
                return state.pending.remove(at: index).messages
            }
            if let mine { return try await send(mine, on: current.connection) }
            minimum = current.id + 1  // a newer attempt took them: wait for it
        }
    }

    /// Sends `messages` on `connection`'s early stream, after its rejoin messages (a new stream when the
    /// connection has none), and returns that stream: its answers always start with the rejoin answers.
    private func send(
        _ messages: [EarlyMessage], on connection: TransportConnection
    ) async throws
        -> TransportStream?
    {
        guard !messages.isEmpty else { return connection.earlyStream }
        let stream: TransportStream
        if let early = connection.earlyStream {
            stream = early
        } else {
            stream = try await connection.openStream()
        }
        for message in messages { try await stream.send(message.bytes) }
        return stream
    }

    // MARK: - The task

    private enum Gate {
        case stop
        case suspended(UInt64)
        case go
    }

    private func run() async {
        while true {
            let gate = state.withLock { state -> Gate in
                if state.stopped { return .stop }
                if state.suspended { return .suspended(state.changeWaiters.generation) }
                return .go
            }
            switch gate {
            case .stop: return
            case .suspended(let generation):
                if statuses.current != .suspended { statuses.publish(.suspended) }
                await state.waitForChange(after: generation)
                continue
            case .go: break
            }
            await attempt()
        }
    }

    /// One attempt: connect; when ready, watch the connection until it dies or a command interrupts; then
    /// decide and wait for the next attempt.
    private func attempt() async {
        let (id, carried, saved, needsLoad, deadRelay) = state.withLock { state in
            state.attempts += 1
            state.wakeRequested = false
            defer {
                state.pending = []
                state.loaded = true
            }
            return (
                state.attempts, state.pending, state.saved, !state.loaded && state.saved == nil, state.deadRelay
            )
        }
        var loaded: ResumptionState?
        if needsLoad, let fromStore = store.load() {
            loaded = fromStore
            state.withLock { if $0.saved == nil { $0.saved = fromStore } }
        }
        let resumption = loaded ?? saved
        if statuses.current != .connecting { statuses.publish(.connecting) }
        let started = MonotonicClock.now()
        let messages = rejoin() + carried.flatMap(\.messages)
        let sink = datagramPath.directSink()
        let (outcome, interrupted) = await untilInterrupted(by: [.stop, .suspend]) {
            [client, address, sink] () -> Result<TransportConnection, any Error> in
            do {
                return .success(
                    try await client.connect(
                        to: address, resuming: resumption, earlyMessages: messages, earlyDatagrams: [],
                        avoiding: deadRelay, datagramSink: sink))
            } catch {
                return .failure(error)
            }
        }
        let connection: TransportConnection
        switch outcome {
        case .success(let made) where !interrupted: connection = made
        case .success(let made):
            await made.close(code: 0, reason: "suspended")
            state.withLock { $0.pending = carried + $0.pending }
            return
        case .failure(let error):
            state.withLock { $0.pending = carried + $0.pending }
            if interrupted { return }
            await retryLater(after: Self.transportError(error), started: started)
            return
        case nil:
            state.withLock { $0.pending = carried + $0.pending }
            return
        }
        let stillWanted = state.changeAndWake { state -> Bool in
            guard !state.stopped, !state.suspended else { return false }
            state.connection = LinkConnection(id: id, connection: connection)
            state.schedule.connected(now: MonotonicClock.now())
            state.networkChanged = false
            return true
        }
        guard stillWanted else {
            await connection.close(code: 0, reason: "suspended")
            return
        }
        datagramPath.attach(connection, sink: sink)
        noticePath.attach(connection)
        statuses.publish(.ready)
        await watch(LinkConnection(id: id, connection: connection), started: started)
    }

    /// How watching a ready connection ended.
    private enum WatchEnd: Sendable {
        case closed(CloseReason?)
        case relayDraining
    }

    /// Watches the ready connection until it dies or a command interrupts, then decides. When its relay drains
    /// (`TransportConnection.relayDraining()`), connects to another relay of the name first and switches over
    /// (make-before-break: the status stays `.ready`); if none takes it, the old connection serves until it closes.
    private func watch(_ ready: LinkConnection, started: UInt64) async {
        var current = ready
        var mayMove = true
        while true {
            let connection = current.connection
            let saver = Task { [state, store] in
                for await refreshed in connection.resumptionStates {
                    store.save(refreshed)  // stored first: whoever sees `resumptionState` finds the store up to date
                    state.withLock { $0.saved = refreshed }
                }
            }
            let (end, watchInterrupted) = await untilInterrupted(by: [.stop, .suspend, .networkChange]) {
                [mayMove] () -> WatchEnd in
                await Self.watchEnd(of: connection, movable: mayMove)
            }
            saver.cancel()
            if !watchInterrupted, case .relayDraining? = end {
                if let replacement = await moveOver(from: current) {
                    current = replacement
                } else {
                    mayMove = false  // nowhere to go: this connection serves until the relay closes it
                }
                continue
            }
            await decide(after: current, end: end, interrupted: watchInterrupted, started: started)
            return
        }
    }

    /// The connection closed, or (when `movable`) its relay asked it to move.
    private static func watchEnd(of connection: TransportConnection, movable: Bool) async -> WatchEnd {
        await withTaskGroup(of: WatchEnd?.self) { group in
            group.addTask { .closed(try? await connection.closed()) }
            if movable {
                group.addTask { (try? await connection.relayDraining()) != nil ? .relayDraining : nil }
            }
            for await end in group {
                guard let end else { continue }
                group.cancelAll()
                return end
            }
            return .closed(nil)
        }
    }

    /// A drain: connects to another relay of the name (the draining one last) with the saved state and the
    /// rejoin messages, and makes it the link's connection; the old one closes. Nil when no other relay took the
    /// connection or a command came first.
    private func moveOver(from old: LinkConnection) async -> LinkConnection? {
        let (id, saved) = state.withLock { state in
            state.attempts += 1
            return (state.attempts, state.saved)
        }
        guard
            let made = try? await client.connect(
                to: address, resuming: saved, earlyMessages: rejoin(), earlyDatagrams: [],
                avoiding: old.connection.remoteAddress)
        else { return nil }
        let replacement = LinkConnection(id: id, connection: made)
        let switched = state.changeAndWake { state -> Bool in
            guard !state.stopped, !state.suspended, state.connection?.id == old.id else { return false }
            state.connection = replacement
            if state.requests?.id == old.id { state.requests = nil }
            return true
        }
        guard switched else {
            await made.close(code: 0, reason: "suspended")
            return nil
        }
        datagramPath.attach(made)
        noticePath.attach(made)
        datagramPath.detach(old.connection)
        noticePath.detach(old.connection)
        retire(old.connection)
        return replacement
    }

    /// Make-before-break on the way in as on the way out: after a move the old connection sends nothing more, but
    /// it keeps delivering what its relay still sends (the echoes and audio in flight when the link switched, an
    /// RTT's worth at a real RTT), and closes once it has been quiet for twice its smoothed RTT (at least 40 ms),
    /// after at most `retireLimit` in all, or when the link stops.
    private func retire(_ old: TransportConnection) {
        datagramPath.retiring(old)
        Task { [datagramPath, state] in
            let quiet = max(.milliseconds(40), await old.statistics().smoothedRTT * 2)
            let clock = ContinuousClock()
            let deadline = clock.now + Self.retireLimit
            // Sleeps until the old connection would have been quiet long enough since its last frame, then looks
            // again: a frame that came meanwhile moves the wake-up, none ends the wait (no fixed-step polling).
            while !state.withLock({ $0.stopped }) {
                let quietAt = min(deadline, (datagramPath.quietSince(old) ?? clock.now) + quiet)
                guard clock.now < quietAt else { break }
                try? await Task.sleep(until: quietAt, clock: clock)
            }
            await old.close(code: 0, reason: Self.movedReason)
            datagramPath.retired(old)
        }
    }

    /// The longest a moved-from connection keeps delivering.
    static let retireLimit: Duration = .seconds(2)

    /// The close reason a draining relay sees once the link moved to another relay.
    static let movedReason = "moved to another relay"

    /// After watching: the connection closed (retry later) or a command interrupted (stop, suspend, network).
    private func decide(after ended: LinkConnection, end: WatchEnd?, interrupted: Bool, started: UInt64) async {
        let connection = ended.connection
        datagramPath.detach(connection)
        noticePath.detach(connection)
        state.changeAndWake { state in
            if state.connection?.id == ended.id { state.connection = nil }
            if state.requests?.id == ended.id { state.requests = nil }
        }
        if interrupted {
            // The reason says which command interrupted (`stop()` closes with the same words, whichever close wins).
            let (changed, closeReason) = state.withLock { state -> (Bool, String) in
                if state.stopped { return (false, Self.stoppedReason) }
                guard !state.suspended, state.networkChanged else { return (false, "suspended") }
                state.networkChanged = false
                state.schedule.networkChanged()
                return (true, "network changed")
            }
            if changed { state.withLock { $0.deadRelay = nil } }  // this side's network, not the relay, changed
            await connection.close(code: 0, reason: closeReason)
            guard changed else { return }
            await retryLater(
                after: TransportError(.connectionClosed, "the network changed; reconnecting"), started: started)
            return
        }
        // Died on its own (dead, hung or restarted relay): another address of the name goes first next time.
        state.withLock { $0.deadRelay = connection.remoteAddress }
        var reason: CloseReason?
        if case .closed(let closed)? = end { reason = closed }
        await retryLater(
            after: reason?.error ?? TransportError(.connectionClosed, "the connection closed"), started: started)
    }

    /// Decides after a failure: stops the link, or publishes `.reconnecting` and waits until the retry is due
    /// (or a command says to go now).
    private func retryLater(after error: TransportError, started: UInt64) async {
        let now = MonotonicClock.now()
        let decision = state.withLock { state -> ReconnectSchedule.Decision? in
            guard !state.stopped, !state.suspended else { return nil }
            if state.networkChanged {
                state.networkChanged = false
                state.schedule.networkChanged()
            }
            return state.schedule.failed(error, started: started, now: now, unit: Double.random(in: 0...1))
        }
        switch decision {
        case nil: return
        case .stop?: end(error)
        case .retry(let attempt, let at)?:
            let deadline = ContinuousClock.now.advanced(by: .nanoseconds(Int64(clamping: at &- now)))
            statuses.publish(.reconnecting(attempt: attempt, nextRetryAt: deadline, reason: error))
            guard at > now else { return }
            _ = await untilInterrupted(by: [.stop, .suspend, .networkChange, .wake]) {
                try? await Task.sleep(until: deadline)
            }
            state.withLock { $0.networkChanged = false }  // acted on: the retry goes now
        }
    }

    private static func transportError(_ error: any Error) -> TransportError {
        if let error = error as? TransportError { return error }
        if error is CancellationError { return TransportError(.cancelled, "the link's task was cancelled") }
        return TransportError(.internalError, "connect failed: \(error)")
    }

    /// Runs `operation` until it returns or one of `interruptions` is pending; then cancels it and waits for
    /// it. Returns its result (nil if it did not produce one) and whether an interruption came first.
    private func untilInterrupted<Output: Sendable>(
        by interruptions: Interruptions, _ operation: @escaping @Sendable () async -> Output
    ) async -> (Output?, Bool) {
        await withTaskGroup(of: RaceStep<Output>.self) { [state] group in
            group.addTask { .done(await operation()) }
            group.addTask {
                while !Task.isCancelled {
                    let (hit, generation) = state.withLock {
                        (interruptions.pending(in: $0), $0.changeWaiters.generation)
                    }
                    if hit { return .interrupted }
                    await state.waitForChange(after: generation)
                }
                return .interrupted
            }
            var output: Output?
            var interrupted = false
            while let step = await group.next() {
                switch step {
                case .done(let value): output = value
                case .interrupted: interrupted = output == nil
                }
                group.cancelAll()
            }
            return (output, interrupted)
        }
    }
}

/// One finisher in `untilInterrupted`'s race.
private enum RaceStep<Output: Sendable>: Sendable {
    case done(Output)
    case interrupted
}

/// The commands that can cut a wait of the link's task short.
struct Interruptions: OptionSet, Sendable {
    let rawValue: UInt8
    static let stop = Interruptions(rawValue: 1)
    static let suspend = Interruptions(rawValue: 2)
    static let networkChange = Interruptions(rawValue: 4)
    static let wake = Interruptions(rawValue: 8)

    /// Whether one of these commands is pending in `state`.
    func pending(in state: LinkState) -> Bool {
        (contains(.stop) && state.stopped) || (contains(.suspend) && state.suspended)
            || (contains(.networkChange) && state.networkChanged) || (contains(.wake) && state.wakeRequested)
    }
}
