import PTTTransport
import TransportCore
import TransportIO

/// One channel's `BurstBuffer`, shared by the channel's loops: the talker's loop appends each frame under a lock,
/// a catching-up member's loop reads frames under the same lock. The floor starts and ends bursts
/// (`ChannelFloor`), so a burst is exactly one talker's grant.
final class ChannelBurst: Sendable {
    let policy: BurstBufferPolicy
    private let buffer: Locked<BurstBuffer>
    /// Datagrams from the talker that were not audio frames, or of another burst, or repeated: dropped.
    private let dropped = Locked<UInt64>(0)

    init(_ policy: BurstBufferPolicy) {
        self.policy = policy
        buffer = Locked(BurstBuffer(policy: policy.bounds))
    }

    /// A new burst for `talker` (its grant); returns its ID (random, never 0).
    func start(talker: MemberIdentity, now: UInt64) -> UInt64 {
        var id: UInt64 = 0
        while id == 0 { id = SecureRandom.bytes(8).reduce(0) { $0 << 8 | UInt64($1) } }
        buffer.withLock { $0.start(id: id, talker: talker, now: now) }
        return id
    }

    /// A burst another relay's floor granted (`id` as the home made it): held from now on, unless it is held
    /// already (a repeated notice keeps its frames).
    func adopt(_ id: UInt64, talker: MemberIdentity, now: UInt64) {
        buffer.withLock { buffer in
            guard buffer.burst?.id != id else { return }
            buffer.start(id: id, talker: talker, now: now)
        }
    }

    /// The burst under way ended (its talker lost the floor).
    func end(now: UInt64) { buffer.withLock { $0.end(now: now) } }

    /// Drops an ended burst whose retention passed (frees its memory).
    func expire(now: UInt64) { buffer.withLock { _ = $0.expire(now: now) } }

    /// Loop thread (the talker's): stores a frame of the talker's; returns its place in the burst when it is to be
    /// forwarded, nil when it is dropped (not an audio frame, another burst, a repeat).
    func append(_ datagram: [UInt8], now: UInt64) -> FramePosition? {
        guard let header = AudioFrameHeader.peek(datagram),
            buffer.withLock({ $0.append(header, datagram, now: now) }) == .stored
        else {
            dropped.withLock { $0 &+= 1 }
            return nil
        }
        return FramePosition(burst: header.burst, sequence: header.sequence)
    }

    /// Where a catch-up of `burst` (0: the current one) from `sequence` starts.
    func catchUp(burst: UInt64, from sequence: UInt32, now: UInt64) throws(TransportError) -> CatchUpStart {
        let (held, from) = try buffer.withLock { buffer throws(TransportError) in
            try buffer.catchUp(burst: burst, from: sequence, now: now)
        }
        return CatchUpStart(burst: held.id, from: from, next: held.next)
    }

    /// Up to `limit` frames of `burst` from `sequence` on; the sequence after them; whether that reaches the
    /// burst's newest frame (the member can go live); whether the burst is still held.
    func frames(
        burst: UInt64, from sequence: UInt32, limit: Int
    )
        -> (frames: [[UInt8]], next: UInt32, caughtUp: Bool, held: Bool)
    {
        buffer.withLock { buffer in
            guard let held = buffer.burst, held.id == burst else { return ([], sequence, true, false) }
            let (frames, next) = buffer.frames(burst: burst, from: sequence, limit: limit)
            return (frames, next, next >= held.next, true)
        }
    }

    /// The burst held now (under way or ended and retained), for a join's answer.
    func state(now: UInt64) -> TalkGroupMessage.BurstState? {
        buffer.withLock { buffer in
            guard let held = buffer.burst,
                held.ended.map({ now < $0 &+ buffer.policy.retainAfterEnd }) ?? true
            else { return nil }
            return TalkGroupMessage.BurstState(
                burst: held.id, talker: held.talker, next: held.next, ended: held.ended != nil)
        }
    }

    /// Bytes and frames held now, frames evicted so far, talker datagrams dropped so far.
    var usage: (bytes: Int, frames: Int, evicted: UInt64, dropped: UInt64) {
        let (bytes, frames, evicted) = buffer.withLock { ($0.bytes, $0.count, $0.evicted) }
        return (bytes, frames, evicted, dropped.withLock { $0 })
    }
}

/// A forwarded frame's place: its burst and sequence (so a member that caught up gets no frame twice).
struct FramePosition: Sendable {
    let burst: UInt64
    let sequence: UInt32
}
