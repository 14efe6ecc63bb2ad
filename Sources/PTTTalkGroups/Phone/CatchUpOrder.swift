/// The phone's order for a burst it catches up: the relay replays the burst from the buffer while the talker goes
/// on, and a live frame can overtake the replay (the relay acts on the join before it reads the catch-up in the same
/// flight, so one live frame may leave first). Frames of that burst are handed on in sequence order: one ahead of the
/// next expected waits for the gap to fill, one already handed on (sent again by the replay) is dropped.
///
/// Bounded: at most `capacity` frames wait, and none longer than `patience` (a replay frame lost on the way must not
/// stall the burst): past either, the waiting frames go on in order and the gap is given up. Frames of any other
/// burst pass at once (one ends the catch-up), as do all frames once no catch-up is running. Sans-IO: the caller passes the time.
struct CatchUpOrder<Frame: Sendable>: Sendable {
    /// The most frames that wait for a gap.
    let capacity: Int
    /// The longest a frame waits for a gap, in nanoseconds.
    let patience: UInt64
    private var burst: UInt64?
    private var expected: UInt32 = 0
    private var waiting: [(sequence: UInt32, since: UInt64, frame: Frame)] = []

    init(capacity: Int = 256, patience: UInt64 = 300_000_000) {
        self.capacity = max(1, capacity)
        self.patience = patience
    }

    /// A catch-up of `burst` from `sequence` begins: its frames are ordered from there on.
    mutating func begin(burst: UInt64, from sequence: UInt32) {
        self.burst = burst
        expected = sequence
        waiting.removeAll()
    }

    /// A frame of `frameBurst` with `sequence` arrived at `now`: the frames to hand on, in order.
    mutating func accept(_ frame: Frame, burst frameBurst: UInt64, sequence: UInt32, now: UInt64) -> [Frame] {
        guard let burst else { return [frame] }
        guard frameBurst == burst else { return end() + [frame] }  // another burst: the catch-up is over
        if sequence < expected { return [] }  // handed on already: the replay's copy of a live frame
        if sequence == expected {
            expected &+= 1
            return [frame] + releaseContiguous()
        }
        if !waiting.contains(where: { $0.sequence == sequence }) {
            waiting.append((sequence, now, frame))
            waiting.sort { $0.sequence < $1.sequence }
        }
        if waiting.count > capacity || now &- (waiting.map(\.since).min() ?? now) > patience {
            return giveUpGap()
        }
        return []
    }

    /// The burst ended (its last frame, or another began): whatever waits goes on, and ordering stops.
    mutating func end() -> [Frame] {
        let rest = waiting.map(\.frame)
        waiting.removeAll()
        burst = nil
        return rest
    }

    private mutating func releaseContiguous() -> [Frame] {
        var out: [Frame] = []
        while let first = waiting.first, first.sequence <= expected {
            waiting.removeFirst()
            if first.sequence == expected {
                out.append(first.frame)
                expected &+= 1
            }
        }
        return out
    }

    private mutating func giveUpGap() -> [Frame] {
        guard let first = waiting.first else { return [] }
        expected = first.sequence
        return releaseContiguous()
    }
}
