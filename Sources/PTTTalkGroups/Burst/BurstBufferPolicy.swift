import PTTTransport
import TransportCore

/// How much of a group's current burst a relay keeps for members that join late (`RelayChannel(burstBuffer:)`,
/// `TalkGroupRelay.Configuration.burstBuffer`), and how fast it replays it to them.
///
/// Memory: a group holds at most `maximumBytes` (each frame is charged its datagram's size plus 64 bytes of
/// bookkeeping), so 1,000 groups each buffering a full burst take at most 1,000 × `maximumBytes`: 384 MiB with the
/// default, which holds 30 s of frames of up to 198 bytes (an 18-byte header and 64 kbit/s Opus). With 24 kbit/s
/// Opus (60-byte frames) a 30 s burst takes 1,500 × 142 bytes = 208 KiB, so 1,000 groups 203 MiB.
public struct BurstBufferPolicy: Hashable, Sendable {
    /// The longest span of a burst held, oldest frame to newest (default 30 s); older frames are dropped.
    public var maximumDuration: Duration
    /// The most bytes one group's buffer holds (default 384 KiB); the oldest frames are dropped beyond it.
    public var maximumBytes: Int
    /// How long a burst stays available after it ended (default 15 s), for members whose push came late; a new
    /// burst in the group replaces it at once.
    public var retainAfterEnd: Duration
    /// How many buffered frames a catching-up member is sent per pacing tick (every 10 ms; default 8, so a backlog
    /// plays out at up to 16 times real time with 20 ms frames).
    public var framesPerTick: Int

    /// A policy; every parameter has the default described on its property.
    public init(
        maximumDuration: Duration = .seconds(30), maximumBytes: Int = 384 * 1024,
        retainAfterEnd: Duration = .seconds(15),
        framesPerTick: Int = 8
    ) {
        self.maximumDuration = maximumDuration
        self.maximumBytes = maximumBytes
        self.retainAfterEnd = retainAfterEnd
        self.framesPerTick = framesPerTick
    }

    /// The sans-IO buffer's bounds.
    var bounds: BurstBuffer.Policy {
        BurstBuffer.Policy(
            maximumDuration: maximumDuration.nanoseconds, maximumBytes: max(1, maximumBytes),
            retainAfterEnd: retainAfterEnd.nanoseconds)
    }
}

/// Where a catch-up starts (`RelayChannel.catchUp(_:burst:from:)`).
public struct CatchUpStart: Hashable, Sendable {
    /// The burst being replayed.
    public var burst: UInt64
    /// The first sequence the member will be sent (later than asked when older frames aged out of the buffer).
    public var from: UInt32
    /// The sequence the burst had reached when the catch-up started: frames from `from` to `next - 1` come from the
    /// buffer, later ones live.
    public var next: UInt32
}
