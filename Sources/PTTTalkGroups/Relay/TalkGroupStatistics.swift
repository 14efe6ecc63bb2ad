/// What a talk-group relay did since it started, for its metrics (`TalkGroupRelay.statistics`, and
/// `ptt-transport serve --talk-groups --admin`'s `/metrics`): floor events by kind, the wake hook, fan-out copies and
/// the burst-buffer frames replayed by catch-ups. Every counter only grows.
public struct TalkGroupStatistics: Sendable, Hashable {
    /// Floors granted.
    public var floorGranted: UInt64 = 0
    /// Floor requests denied, by TS 24.380 reject cause code (`FloorDenyCause.code`: 1, 4, 5, 6, 7, 255).
    public var floorDenied: [UInt8: UInt64] = [:]
    /// Floor requests queued, and each change of a waiting member's place in line.
    public var floorQueued: UInt64 = 0
    /// Floors taken back, by TS 24.380 reject cause code (`FloorRevokeCause.code`: 2, 4, 6, 255).
    public var floorRevoked: [UInt8: UInt64] = [:]
    /// Floors released, by why (`FloorReleaseReason`'s raw value).
    public var floorReleased: [String: UInt64] = [:]
    /// Talk-time warnings sent to talkers.
    public var talkTimeWarnings: UInt64 = 0
    /// What the wake hook did (all zero without a `WakeSender`).
    public var wake = WakeStatistics()
    /// Copies of audio frames handed to listeners' transports (one a listener a frame).
    public var fanOutCopies: UInt64 = 0
    /// Burst-buffer frames sent to members catching up on a burst.
    public var catchUpFrames: UInt64 = 0

    /// All zero.
    public init() {}

    /// Counts one floor event.
    mutating func count(_ event: FloorEvent) {
        switch event {
        case .granted: floorGranted &+= 1
        case .queued: floorQueued &+= 1
        case .denied(_, _, let cause): floorDenied[cause.code, default: 0] &+= 1
        case .revoked(_, let cause): floorRevoked[cause.code, default: 0] &+= 1
        case .talkTimeWarning: talkTimeWarnings &+= 1
        case .released(_, let reason): floorReleased[reason.rawValue, default: 0] &+= 1
        }
    }
}
