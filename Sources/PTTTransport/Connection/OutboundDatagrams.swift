import TransportCore
import TransportIO

/// Datagrams the application offered, waiting for the event loop: validated on the caller's thread, bounded
/// (the oldest is dropped and counted when full), handed to the loop in batches with one wake-up.
final class OutboundDatagrams: Sendable {
    private struct State {
        var closeError: TransportError?
        var ready = false
        var maxPayload = 0
        var pending: [(payload: [UInt8], deadline: UInt64)] = []
        var drainScheduled = false
        var overflowed: UInt64 = 0
    }
    private let state = Locked(State())
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// The handshake completed: from now on payloads are checked against `maxPayload` (0: not negotiated).
    func ready(maxPayload: Int) {
        state.withLock {
            $0.ready = true
            $0.maxPayload = maxPayload
        }
    }

    /// The connection ended: every later offer throws `error`.
    func fail(_ error: TransportError) {
        state.withLock {
            $0.closeError = error
            $0.pending.removeAll()
        }
    }

    var maxPayload: Int { state.withLock { $0.maxPayload } }
    /// Frames dropped because the application offered more than the queue holds.
    var overflowed: UInt64 { state.withLock { $0.overflowed } }

    /// Validates one datagram without queueing it (the loop-thread path that hands it to the core directly).
    func validate(_ payload: [UInt8]) throws(TransportError) {
        try state.withLock { state throws(TransportError) in try Self.check(payload, state) }
    }

    private static func check(_ payload: [UInt8], _ state: State) throws(TransportError) {
        if let error = state.closeError { throw error }
        try checkPayload(payload, maximum: state.ready ? state.maxPayload : nil)
    }

    /// Checks a datagram against `maximum` (the largest payload, 0 when the peer negotiated no DATAGRAM frames;
    /// nil when not known yet: then only an empty payload is refused).
    static func checkPayload(_ payload: [UInt8], maximum: Int?) throws(TransportError) {
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

    /// Validates and queues one datagram; returns true when the caller must schedule a drain on the loop.
    func offer(_ payload: [UInt8], deadline: UInt64) throws(TransportError) -> Bool {
        try state.withLock { state throws(TransportError) -> Bool in
            try Self.check(payload, state)
            if state.pending.count >= capacity {
                state.pending.removeFirst()
                state.overflowed += 1
            }
            state.pending.append((payload, deadline))
            if state.drainScheduled { return false }
            state.drainScheduled = true
            return true
        }
    }

    /// Loop side: everything queued so far.
    /// Loop thread, a relay forwarding: checks `payload` like `validate` and takes the frames other threads
    /// offered first (nil when there are none, the common case: one lock, no allocation).
    func validateAndTakePending(_ payload: [UInt8]) throws(TransportError) -> [(payload: [UInt8], deadline: UInt64)]? {
        try state.withLock { state throws(TransportError) in
            try Self.check(payload, state)
            guard !state.pending.isEmpty else { return nil }
            state.drainScheduled = false
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
    }

    func takeBatch() -> [(payload: [UInt8], deadline: UInt64)] {
        state.withLock { state in
            state.drainScheduled = false
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
    }
}
