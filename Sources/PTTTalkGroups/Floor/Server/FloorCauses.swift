/// Why a ``FloorServer`` denied a Floor Request: the Reject Cause of MCPTT's Floor Deny message (3GPP TS 24.380),
/// with its code.
public enum FloorDenyCause: Sendable, Hashable {
    /// #1: another member has permission to talk, and this one may not wait (no queue, a broadcast call, or the
    /// request said it would not wait).
    case anotherMemberHasPermission
    /// #4: the retry-after timer has not expired: this member lost the floor for talking too long and may ask again
    /// after the given time (``FloorServerConfiguration/retryAfter``). Emergency and imminent-peril requests are
    /// never denied for this.
    case retryAfter(Duration)
    /// #5: the member only listens (``FloorRole/receiveOnly``).
    case receiveOnly
    /// #6: no resources: the application said the group cannot take a new talker now
    /// (``FloorServer/setResources(available:now:)``).
    case noResources
    /// #7: the queue is full (``FloorServerConfiguration/queueCapacity``).
    case queueFull
    /// #255: other: the request came from a member not in the call.
    case other

    /// The Reject Cause code of TS 24.380's Floor Deny.
    public var code: UInt8 {
        switch self {
        case .anotherMemberHasPermission: 1
        case .retryAfter: 4
        case .receiveOnly: 5
        case .noResources: 6
        case .queueFull: 7
        case .other: 255
        }
    }

    /// The cause a Floor Deny's reject-cause `code` names: the one table from code to cause, for a phone reading
    /// the talk-group protocol's `floor denied` (``TalkGroupMessage/floorDenied(group:holder:cause:)``) and anything
    /// else that receives a code. `retryAfter` is the time cause #4 carries (zero when the sender did not say). A
    /// code this version does not know (#2 internal error, #3 only one participant, or a newer one) reads as
    /// ``other``: TS 24.380 gives a participant nothing more to do for those than for #255.
    public init(code: UInt64, retryAfter: Duration = .zero) {
        switch code {
        case 1: self = .anotherMemberHasPermission
        case 4: self = .retryAfter(retryAfter)
        case 5: self = .receiveOnly
        case 6: self = .noResources
        case 7: self = .queueFull
        default: self = .other
        }
    }

    /// The cause in words, without its code, as a phone tells its user: "another member has permission",
    /// "retry after 3.0 seconds", "receive only", "no resources", "queue full" or "other".
    public var meaning: String {
        switch self {
        case .anotherMemberHasPermission: "another member has permission"
        case .retryAfter(let time): "retry after \(time)"
        case .receiveOnly: "receive only"
        case .noResources: "no resources"
        case .queueFull: "queue full"
        case .other: "other"
        }
    }
}

/// Why a ``FloorServer`` took the floor back: the Reject Cause of MCPTT's Floor Revoke message (3GPP TS 24.380),
/// with its code.
public enum FloorRevokeCause: Sendable, Hashable, CaseIterable {
    /// #2: media burst too long: the holder talked for ``FloorServerConfiguration/stopTalking`` (T2).
    case mediaBurstTooLong
    /// #4: media burst pre-empted: a more urgent or, by the group's policy, higher-priority request took the floor.
    case preempted
    /// #6: no resources (the application's choice, with ``FloorServer/revoke(cause:now:)``).
    case noResources
    /// #255: other (the application's revoke by default).
    case other

    /// The Reject Cause code of TS 24.380's Floor Revoke.
    public var code: UInt8 {
        switch self {
        case .mediaBurstTooLong: 2
        case .preempted: 4
        case .noResources: 6
        case .other: 255
        }
    }
}
