import PTTTransport
import TransportCore

/// One group's current burst, kept from its first frame so a member that joins late — woken by a push a second or
/// two into the burst — hears all of it: the frames in sequence order, bounded by duration and bytes, and kept for a
/// while after the burst ended. Sans-IO: times are passed in (monotonic nanoseconds), so tests drive it with a
/// virtual clock; `ChannelBurst` runs it under a lock with the loops' clock.
///
/// A frame is stored as the datagram the talker sent (header and audio), shared with the live copies (no copy).
/// It is charged its size plus `frameOverhead` against `Policy.maximumBytes`; the oldest frames go first when either
/// bound is passed.
package struct BurstBuffer {
    /// The bounds.
    package struct Policy: Equatable, Sendable {
        /// The longest span of frames held (arrival of the oldest to the newest), in nanoseconds.
        package var maximumDuration: UInt64
        /// The most bytes held (each frame's size plus `frameOverhead`).
        package var maximumBytes: Int
        /// How long an ended burst stays available for catch-up, in nanoseconds.
        package var retainAfterEnd: UInt64

        package init(maximumDuration: UInt64, maximumBytes: Int, retainAfterEnd: UInt64) {
            self.maximumDuration = maximumDuration
            self.maximumBytes = maximumBytes
            self.retainAfterEnd = retainAfterEnd
        }
    }

    /// What the buffer knows of the burst it holds.
    package struct Burst: Equatable, Sendable {
        package let id: UInt64
        package let talker: MemberIdentity
        /// When it started (its grant).
        package let started: UInt64
        /// When it ended (the floor was released), nil while it goes on.
        package var ended: UInt64?
        /// One past the highest sequence received (0 before the first frame).
        package var next: UInt32 = 0
        /// The lowest sequence still held (frames below it aged out).
        package var oldestHeld: UInt32 = 0
    }

    /// The answer to `append`.
    package enum Append: Equatable {
        /// Stored: forward it live.
        case stored
        /// Not the current burst (a frame of an earlier burst, or no burst): drop it.
        case wrongBurst
        /// A sequence already held, or one older than the oldest held: drop it (no member gets it twice).
        case duplicate
    }

    /// A frame's bookkeeping cost beyond its bytes (array header, allocation, index entry), counted against
    /// `maximumBytes` so the bound is what the frames really take.
    package static let frameOverhead = 64

    package let policy: Policy
    package private(set) var burst: Burst?
    /// Frames held, ascending sequence, from `head`.
    private var frames: [(sequence: UInt32, arrived: UInt64, bytes: [UInt8])] = []
    private var head = 0
    /// Bytes held (frames plus overhead).
    package private(set) var bytes = 0
    /// Frames dropped to stay within the bounds, since the buffer was made.
    package private(set) var evicted: UInt64 = 0

    package init(policy: Policy) { self.policy = policy }

    /// Frames held now.
    package var count: Int { frames.count - head }

    /// A new burst begins (its grant): whatever was held goes.
    package mutating func start(id: UInt64, talker: MemberIdentity, now: UInt64) {
        clear()
        burst = Burst(id: id, talker: talker, started: now)
    }

    /// The current burst ended at `now` (its talker released the floor); it stays for `retainAfterEnd`.
    package mutating func end(now: UInt64) {
        guard burst?.ended == nil else { return }
        burst?.ended = now
    }

    /// Drops an ended burst whose retention passed; returns when to look again (nil: nothing to drop later).
    @discardableResult
    package mutating func expire(now: UInt64) -> UInt64? {
        guard let ended = burst?.ended else { return nil }
        let deadline = ended &+ policy.retainAfterEnd
        guard now >= deadline else { return deadline }
        clear()
        burst = nil
        return nil
    }

    /// A frame of the talker's arrived at `now`.
    package mutating func append(_ header: AudioFrameHeader, _ datagram: [UInt8], now: UInt64) -> Append {
        guard var current = burst, current.id == header.burst, current.ended == nil else { return .wrongBurst }
        let sequence = header.sequence
        let entry = (sequence: sequence, arrived: now, bytes: datagram)
        if sequence >= current.next {
            frames.append(entry)
            current.next = sequence &+ 1
        } else {
            guard sequence >= current.oldestHeld else { return .duplicate }
            let index = firstIndex(atLeast: sequence)
            if index < frames.count, frames[index].sequence == sequence { return .duplicate }
            frames.insert(entry, at: index)
        }
        bytes += datagram.count + Self.frameOverhead
        burst = current
        evict(now: now)
        return .stored
    }

    /// The burst a catch-up for `id` (0: the current one) from `sequence` would serve at `now`, and the sequence it
    /// starts from (later than asked when older frames aged out).
    ///
    /// - Throws: `burstUnavailable` when no such burst is held (never here, ended and aged out, or replaced);
    ///   `sequenceInFuture` when `sequence` is beyond the burst's next frame.
    package func catchUp(
        burst id: UInt64, from sequence: UInt32, now: UInt64
    ) throws(TransportError)
        -> (burst: Burst, from: UInt32)
    {
        guard let held = burst, id == 0 || held.id == id,
            held.ended.map({ now < $0 &+ policy.retainAfterEnd }) ?? true
        else {
            throw TransportError(
                .burstUnavailable,
                id == 0
                    ? "the group has no burst held for catch-up"
                    : "burst \(Hex.string(Self.bytes(of: id))) is not held here: it ended and aged out, a newer "
                        + "burst replaced it, or it never ran on this relay")
        }
        guard sequence <= held.next else {
            throw TransportError(
                .sequenceInFuture,
                "catch-up from sequence \(sequence), but the burst's next frame is \(held.next): ask from a sequence "
                    + "received already (0: the burst's start)")
        }
        return (held, max(sequence, held.oldestHeld))
    }

    /// Up to `limit` frames of burst `id` from `sequence` on, in order, and the sequence after the last one returned
    /// (`sequence` when none). Empty when the burst is not held.
    package func frames(burst id: UInt64, from sequence: UInt32, limit: Int) -> (frames: [[UInt8]], next: UInt32) {
        guard let held = burst, held.id == id, limit > 0 else { return ([], sequence) }
        var index = firstIndex(atLeast: sequence)
        var out: [[UInt8]] = []
        var next = sequence
        while index < frames.count, out.count < limit {
            out.append(frames[index].bytes)
            next = frames[index].sequence &+ 1
            index += 1
        }
        return (out, next)
    }

    private mutating func evict(now: UInt64) {
        guard var current = burst else { return }
        while count > 1,
            bytes > policy.maximumBytes
                || frames[frames.count - 1].arrived &- frames[head].arrived > policy.maximumDuration
        {
            bytes -= frames[head].bytes.count + Self.frameOverhead
            frames[head].bytes = []
            head += 1
            evicted &+= 1
            current.oldestHeld = frames[head].sequence
        }
        burst = current
        if head > 64, head * 2 > frames.count {
            frames.removeFirst(head)
            head = 0
        }
    }

    /// The index of the first held frame with a sequence of at least `sequence` (binary search).
    private func firstIndex(atLeast sequence: UInt32) -> Int {
        var low = head
        var high = frames.count
        while low < high {
            let middle = (low + high) / 2
            if frames[middle].sequence < sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func clear() {
        frames.removeAll()
        head = 0
        bytes = 0
    }

    static func bytes(of id: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: id >> ($0 * 8)) } }
}
