import Synchronization

/// One connection's outbound datagrams, on either transport: the only place a datagram is validated, queued,
/// expired and counted.
///
/// The application offers from any thread (`offer`), checked once against the peer's limit; the event loop takes
/// frames when it has room (QUIC: `popFresh` per packet; QMux: `takeFresh` per batch). Audio is useless late: a
/// frame whose deadline passed is dropped and counted instead of sent, and the queue is bounded (the oldest frame
/// goes first when it is full, counted the same way), so nothing waits forever.
package final class DatagramQueue: Sendable {
    /// A queued frame.
    package struct Entry: Sendable {
        /// What the application offered.
        package var payload: [UInt8]
        /// When it stops being worth sending (`UInt64.max`: never).
        package var deadline: UInt64
        /// A number that identifies it to the transport (QUIC's datagram ID).
        package var id: UInt64
    }

    private struct State {
        var entries: [Entry] = []
        var head = 0
        var nextID: UInt64 = 0
        /// The largest payload the peer accepts (nil: not known yet; 0: no DATAGRAM frames).
        var maximum: Int?
        var closeError: TransportError?
        /// A frame was offered off the loop and the loop was not woken for it yet.
        var wakePending = false
        var dropped: UInt64 = 0

        var count: Int { entries.count - head }
    }

    /// The queue's state behind a pthread mutex (not `Synchronization.Mutex`: ThreadSanitizer does not see its
    /// ordering and reports every hand-over between the application and the loop as a race).
    private let state = Locked(State())
    /// How many frames wait, stored under the lock after every change: the loop asks for the next frame once more
    /// after each packet it writes, and a relay writes thousands of packets a turn, so the usual answer, none,
    /// costs one atomic load instead of a lock. A frame offered off the loop meanwhile is not missed: its offer
    /// wakes the loop (`offer`'s result), whose next pass reads the count after taking the lock in `woken`.
    private let waiting = Atomic<Int>(0)
    /// How many frames wait at most.
    package let capacity: Int

    /// A queue of at most `capacity` frames.
    package init(capacity: Int) { self.capacity = max(1, capacity) }

    // MARK: - Any thread

    /// Validates one datagram and queues it; returns true when the caller must wake the loop for it (a call off
    /// the loop passes `wake: true`; the loop itself sends at the end of its turn).
    package func offer(_ payload: [UInt8], deadline: UInt64, wake: Bool) throws(TransportError) -> Bool {
        try change { state throws(TransportError) -> Bool in
            if let error = state.closeError { throw error }
            try Self.checkPayload(payload, maximum: state.maximum)
            Self.append(payload, deadline: deadline, to: &state, capacity: capacity)
            guard wake, !state.wakePending else { return false }
            state.wakePending = true
            return true
        }
    }

    /// Queues a frame another check already accepted (the core's own `sendDatagram`, with its pre-handshake
    /// limits), unless the queue was closed.
    package func enqueue(_ payload: [UInt8], deadline: UInt64) throws(TransportError) {
        try change { state throws(TransportError) in
            if let error = state.closeError { throw error }
            Self.append(payload, deadline: deadline, to: &state, capacity: capacity)
        }
    }

    /// The largest payload accepted now (0 until the handshake completed, or when not negotiated).
    package var maxPayload: Int { state.withLock { $0.maximum ?? 0 } }

    /// Frames dropped unsent: expired, pushed out by newer ones, or held back by the transport (see `countDropped`).
    package var expired: UInt64 { state.withLock { $0.dropped } }

    /// Checks a datagram against `maximum` (the largest payload, 0 when the peer negotiated no DATAGRAM frames;
    /// nil when not known yet: then only an empty payload is refused).
    package static func checkPayload(_ payload: [UInt8], maximum: Int?) throws(TransportError) {
        guard !payload.isEmpty else {
            throw TransportError(
                .datagramEmpty, "an empty datagram cannot be sent; audio frames carry at least one byte")
        }
        guard let maximum else { return }
        guard maximum > 0 else {
            throw TransportError(.datagramsUnsupported, "the peer did not negotiate DATAGRAM frames (RFC 9221)")
        }
        guard payload.count <= maximum else {
            throw TransportError(
                .datagramTooLarge,
                "a datagram of \(payload.count) bytes exceeds the current maximum payload of \(maximum) bytes")
        }
    }

    // MARK: - Loop side

    /// The handshake completed: from now on payloads are checked against `maxPayload` (0: not negotiated).
    package func ready(maxPayload: Int) { state.withLock { $0.maximum = maxPayload } }

    /// The connection ended: every later offer throws `error`; what still waits is dropped (and counted).
    package func fail(_ error: TransportError) {
        change { state in
            if state.closeError == nil { state.closeError = error }
            Self.dropAll(&state)
        }
    }

    /// The loop ran for the wake-up `offer` asked for: the next offer off the loop asks again.
    package func woken() { state.withLock { $0.wakePending = false } }

    /// The oldest frame still fresh at `now`, dropping (and counting) stale ones on the way, and whether more
    /// frames wait behind it.
    package func peekFresh(now: UInt64) -> (entry: Entry, more: Bool)? {
        guard waiting.load(ordering: .acquiring) > 0 else { return nil }
        return change { state in
            while state.head < state.entries.count {
                if state.entries[state.head].deadline >= now {
                    return (state.entries[state.head], state.count > 1)
                }
                state.head += 1
                state.dropped += 1
            }
            Self.compact(&state)
            return nil
        }
    }

    /// The oldest frame still fresh at `now`, taken out of the queue (stale ones on the way are dropped and
    /// counted), and whether more frames wait behind it: `peekFresh` and `removeFirst` under one lock, for the
    /// writer that usually takes what it peeked (a relay's copy). A frame the transport could not take after all
    /// goes back in front with `restoreFirst`; until then it is neither counted as waiting nor dropped by `drop`.
    package func popFresh(now: UInt64) -> (entry: Entry, more: Bool)? {
        guard waiting.load(ordering: .acquiring) > 0 else { return nil }
        return change { state in
            while state.head < state.entries.count {
                let entry = state.entries[state.head]
                state.head += 1
                if entry.deadline >= now {
                    let more = state.count > 0
                    Self.compact(&state)
                    return (entry, more)
                }
                state.dropped += 1
            }
            Self.compact(&state)
            return nil
        }
    }

    /// Puts back in front the frame `popFresh` returned, which the transport did not take (no room in this packet).
    /// Dropped and counted instead when the queue closed meanwhile or filled up behind it (it is the oldest).
    package func restoreFirst(_ entry: Entry) {
        change { state in
            guard state.closeError == nil, state.count < capacity else {
                state.dropped += 1
                return
            }
            if state.head > 0 {
                state.head -= 1
                state.entries[state.head] = entry
            } else {
                state.entries.insert(entry, at: 0)
            }
        }
    }

    /// Removes the frame `peekFresh` returned.
    package func removeFirst() {
        change { state in
            precondition(state.head < state.entries.count)
            state.head += 1
            Self.compact(&state)
        }
    }

    /// Whether no frame waits.
    package var isEmpty: Bool { waiting.load(ordering: .acquiring) == 0 }

    /// How many frames wait.
    package var count: Int { waiting.load(ordering: .acquiring) }

    /// Every frame still fresh at `now`, in order; stale ones are dropped and counted. Clears a pending wake-up.
    package func takeFresh(now: UInt64) -> [Entry] {
        change { state in
            state.wakePending = false
            var fresh: [Entry] = []
            for entry in state.entries[state.head...] {
                if entry.deadline >= now { fresh.append(entry) } else { state.dropped += 1 }
            }
            state.entries.removeAll(keepingCapacity: true)
            state.head = 0
            return fresh
        }
    }

    /// Drops (and counts) every waiting frame `matches` picks, keeping the others in order; returns how many went.
    /// For frames that lost their worth before they left: a pre-empted talker's audio still queued for a listener.
    @discardableResult
    package func drop(where matches: ([UInt8]) -> Bool) -> Int {
        change { state in
            let before = state.count
            guard before > 0 else { return 0 }
            let kept = state.entries[state.head...].filter { !matches($0.payload) }
            state.entries.removeAll(keepingCapacity: true)
            state.entries.append(contentsOf: kept)
            state.head = 0
            let dropped = before - kept.count
            state.dropped += UInt64(dropped)
            return dropped
        }
    }

    /// Counts frames the transport took but dropped unsent (QMux: held back while TCP's unsent queue is long).
    package func countDropped(_ count: Int) { state.withLock { $0.dropped += UInt64(count) } }

    // MARK: - Private

    /// `state.withLock`, then publishes the count for `peekFresh`, `isEmpty` and `count`.
    private func change<Result, Failure: Error>(
        _ body: (inout State) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try state.withLock { state throws(Failure) -> Result in
            defer { waiting.store(state.count, ordering: .releasing) }
            return try body(&state)
        }
    }

    private static func append(_ payload: [UInt8], deadline: UInt64, to state: inout State, capacity: Int) {
        if state.count >= capacity {
            state.head += 1
            state.dropped += 1
        }
        state.entries.append(Entry(payload: payload, deadline: deadline, id: state.nextID))
        state.nextID &+= 1
        compact(&state)
    }

    private static func dropAll(_ state: inout State) {
        state.dropped += UInt64(state.count)
        state.entries.removeAll()
        state.head = 0
    }

    private static func compact(_ state: inout State) {
        if state.head == state.entries.count {
            state.entries.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head > 64 && state.head * 2 > state.entries.count {
            state.entries.removeFirst(state.head)
            state.head = 0
        }
    }
}
