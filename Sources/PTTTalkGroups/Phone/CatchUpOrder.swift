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
    private var waiting: [(sequence: UInt32, since: UInt64, frame: Frame)] = []  // by sequence
    private var oldestSince: UInt64?  // the earliest arrival among `waiting`: no scan per frame

    init(capacity: Int = 256, patience: UInt64 = 300_000_000) {
        self.capacity = max(1, capacity)
        self.patience = patience
    }

    /// A catch-up of `burst` from `sequence` begins: its frames are ordered from there on.
    mutating func begin(burst: UInt64, from sequence: UInt32) {
        self.burst = burst
        expected = sequence
        waiting.removeAll()
        oldestSince = nil
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
        let slot = insertionIndex(of: sequence)
        if slot == waiting.endIndex || waiting[slot].sequence != sequence {
            waiting.insert((sequence, now, frame), at: slot)
            oldestSince = min(oldestSince ?? now, now)
        }
        if waiting.count > capacity || now &- (oldestSince ?? now) > patience {
            return giveUpGap()
        }
        return []
    }

    /// The burst ended (its last frame, or another began): whatever waits goes on, and ordering stops.
    mutating func end() -> [Frame] {
        let rest = waiting.map(\.frame)
        waiting.removeAll()
        oldestSince = nil
        burst = nil
        return rest
    }

    /// Where `sequence` goes in `waiting` (binary search: the first place whose sequence is not below it).
    private func insertionIndex(of sequence: UInt32) -> Int {
        var low = waiting.startIndex
        var high = waiting.endIndex
        while low < high {
            let middle = (low + high) / 2
            if waiting[middle].sequence < sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func releaseContiguous() -> [Frame] {
        var released = 0
        var out: [Frame] = []
        while released < waiting.count, waiting[released].sequence <= expected {
            if waiting[released].sequence == expected {
                out.append(waiting[released].frame)
                expected &+= 1
            }
            released += 1
        }
        guard released > 0 else { return out }
        waiting.removeFirst(released)
        oldestSince = waiting.lazy.map(\.since).min()  // only when frames leave: rare beside arrivals
        return out
    }

    private mutating func giveUpGap() -> [Frame] {
        guard let first = waiting.first else { return [] }
        expected = first.sequence
        return releaseContiguous()
    }
}
