import PTTTransport
import TransportCore

/// A control message of the talk-group protocol, one per transport message on a phone's control stream (the
/// stream its join went on). The wire form is a QUIC varint message type followed by `(key, length, value)`
/// fields, documented field by field in the PTTTalkGroups article *The talk-group protocol*. Phones send the first
/// five; the relay sends the others.
public enum TalkGroupMessage: Hashable, Sendable {
    /// Joins `group` as the user named in `join` (replay-safe: it may ride in 0-RTT).
    case join(JoinRequest)
    /// Asks for the buffered frames of `burst` from `sequence` on, then the live ones (replay-safe). `burst` 0
    /// means the group's current (or most recent) burst.
    case catchUp(group: String, burst: UInt64, from: UInt32)
    /// Asks for the floor of `group`. Not replay-safe: in 0-RTT a relay acts on it at once only when the transport
    /// accepted the flight's early data (its anti-replay store claimed the ticket), otherwise once the handshake
    /// completed.
    /// `priority` (0–255, highest last) orders the line and, by the group's policy, pre-empts; `emergency` pre-empts a
    /// less urgent holder (MCPTT's Floor Request).
    case requestFloor(group: String, priority: UInt8, emergency: Bool)
    /// Gives the floor of `group` up (or a place in its line).
    case releaseFloor(group: String)
    /// Leaves `group`: the user stops being a member (no wake, no presence).
    case leave(group: String)

    /// The relay's answer to a join: the user is a member; `current` is the burst under way or held, if any (a
    /// phone that wants it asks with `catchUp`).
    case joined(group: String, user: MemberIdentity, current: BurstState?)
    /// A catch-up began: the frames of `burst` from `from` follow as datagrams, then the live ones; `next` is the
    /// sequence the burst had reached when the catch-up started.
    case catchUpStarted(group: String, burst: UInt64, from: UInt32, next: UInt32)
    /// The floor is this phone's: stamp audio frames with `burst`.
    case floorGranted(group: String, burst: UInt64)
    /// The floor is taken; this phone waits at `position` (1: next).
    case floorQueued(group: String, position: UInt64)
    /// The floor request is refused for `cause` (MCPTT's reject cause, with the time a retry-after denial carries);
    /// `holder` holds the floor, nil when nobody does (an idle floor denied for retry-after, receive only or no
    /// resources). The wire carries the holder only when there is one (see the protocol article for phones of the
    /// first revision).
    case floorDenied(group: String, holder: MemberIdentity?, cause: FloorDenyCause)
    /// Another member, `talker`, holds the floor now, talking in `burst` (MCPTT's Floor Taken).
    case floorTaken(group: String, burst: UInt64, talker: MemberIdentity)
    /// `talker` no longer holds the floor, for `reason`; `burst` ended (MCPTT's Floor Idle unless a grant follows).
    case floorReleased(group: String, burst: UInt64, talker: MemberIdentity, reason: FloorReleaseReason)
    /// The answer to `leave`.
    case left(group: String)
    /// A request was refused: `request` is its message type, `code` says why (`TalkGroupErrorCode`), `message`
    /// in words. Nothing was held for it.
    case error(request: UInt64, code: TalkGroupErrorCode, message: String, group: String?)

    /// What a phone sends to join.
    public struct JoinRequest: Hashable, Sendable {
        /// The group.
        public var group: String
        /// Who joins.
        public var user: MemberIdentity
        /// What proves it (a token from the app's server; checked by the relay's authenticator). At most 1024
        /// bytes.
        public var credential: [UInt8]
        /// Where a push wakes the phone while it is suspended (nil: it cannot be woken).
        public var wakeAddress: WakeAddress?
        /// Whether the member may ask for the floor: ``FloorRole/receiveOnly`` joins a member that only listens (its
        /// floor requests are denied with reject cause #5, its audio dropped and counted). The relay's authenticator
        /// sees it with the credential, so an app's check can refuse a role the credential does not grant.
        public var role: FloorRole
        /// The protocol revision the phone implements (``TalkGroupMessage/revision`` for this library; a join
        /// without the field is of revision 1). A relay answers a phone of revision 1 in the form it reads.
        public var revision: UInt64

        /// A join request of this library's revision.
        public init(
            group: String, user: MemberIdentity, credential: [UInt8], wakeAddress: WakeAddress?,
            role: FloorRole = .transmitAndReceive
        ) {
            self.group = group
            self.user = user
            self.credential = credential
            self.wakeAddress = wakeAddress
            self.role = role
            revision = TalkGroupMessage.revision
        }
    }

    /// A burst as a join answer describes it.
    public struct BurstState: Hashable, Sendable {
        /// Its ID.
        public var burst: UInt64
        /// Who talks (or talked) in it.
        public var talker: MemberIdentity
        /// The sequence its next frame will have (how many frames it reached).
        public var next: UInt32
        /// Whether it ended (it is still held for catch-up).
        public var ended: Bool

        /// A burst state.
        public init(burst: UInt64, talker: MemberIdentity, next: UInt32, ended: Bool) {
            self.burst = burst
            self.talker = talker
            self.next = next
            self.ended = ended
        }
    }

    /// The message type numbers (the varint that starts every message).
    public enum Kind: UInt64, Sendable, CaseIterable {
        /// `join`.
        case join = 0x01
        /// `catchUp`.
        case catchUp = 0x02
        /// `requestFloor`.
        case requestFloor = 0x03
        /// `releaseFloor`.
        case releaseFloor = 0x04
        /// `leave`.
        case leave = 0x05
        /// `joined`.
        case joined = 0x41
        /// `catchUpStarted`.
        case catchUpStarted = 0x42
        /// `floorGranted`.
        case floorGranted = 0x43
        /// `floorQueued`.
        case floorQueued = 0x44
        /// `floorDenied`.
        case floorDenied = 0x45
        /// `floorTaken`.
        case floorTaken = 0x46
        /// `floorReleased`.
        case floorReleased = 0x47
        /// `left`.
        case left = 0x48
        /// `error`.
        case error = 0x4F
    }

    /// This message's type.
    public var kind: Kind {
        switch self {
        case .join: .join
        case .catchUp: .catchUp
        case .requestFloor: .requestFloor
        case .releaseFloor: .releaseFloor
        case .leave: .leave
        case .joined: .joined
        case .catchUpStarted: .catchUpStarted
        case .floorGranted: .floorGranted
        case .floorQueued: .floorQueued
        case .floorDenied: .floorDenied
        case .floorTaken: .floorTaken
        case .floorReleased: .floorReleased
        case .left: .left
        case .error: .error
        }
    }

    /// Whether replaying this message changes nothing: a phone may send it in 0-RTT.
    public var isReplaySafe: Bool {
        switch self {
        case .join, .catchUp: true
        default: false
        }
    }

    /// The protocol revision this library speaks: 2 (revision 1 had no floor role at join, and its `floor denied`
    /// always named a holder).
    public static let revision: UInt64 = 2

    /// The most UTF-8 bytes a group name may take.
    public static let maximumGroupSize = 64
    /// The most bytes a join credential may take.
    public static let maximumCredentialSize = 1024
    /// The most bytes one control message may take (a relay reads no larger one).
    public static let maximumSize = 4096
}

/// Field keys (see the protocol article's table).
enum FieldKey {
    static let group: UInt64 = 1
    static let user: UInt64 = 2
    static let credential: UInt64 = 3
    static let platform: UInt64 = 4
    static let pushToken: UInt64 = 5
    static let burst: UInt64 = 6
    static let from: UInt64 = 7
    static let priority: UInt64 = 8
    static let floorFlags: UInt64 = 9
    static let talker: UInt64 = 10
    static let next: UInt64 = 11
    static let ended: UInt64 = 12
    static let position: UInt64 = 14
    static let cause: UInt64 = 16
    static let reason: UInt64 = 17
    static let request: UInt64 = 18
    static let code: UInt64 = 19
    static let text: UInt64 = 20
    static let serverName: UInt64 = 21
    static let port: UInt64 = 22
    static let quicLBServerID: UInt64 = 23
    static let role: UInt64 = 24
    static let revision: UInt64 = 25
    static let retryAfter: UInt64 = 26
}

/// `FloorReleaseReason` on the wire.
extension FloorReleaseReason {
    /// The wire number of each reason, in declaration order from 0.
    static let wireOrder: [FloorReleaseReason] = [
        .released, .revoked, .idle, .left, .closed, .unresponsive, .preempted, .talkTimeExceeded,
    ]

    var wireValue: UInt64 { UInt64(Self.wireOrder.firstIndex(of: self)!) }

    init(wireValue: UInt64) throws(TransportError) {
        guard wireValue < UInt64(Self.wireOrder.count) else {
            throw WireFields.malformed("floor release reason \(wireValue) is unknown")
        }
        self = Self.wireOrder[Int(wireValue)]
    }
}
