extension FloorServer {
    /// A floor control message for one member, named after MCPTT's (3GPP TS 24.380); the application encodes it for
    /// the member's phone as its protocol likes.
    public enum Message: Sendable, Hashable {
        /// Floor Granted: the member may talk now, for at most `duration` (T2; nil: no limit) from the grant (when
        /// repeated, what is left of it), at `priority` and `urgency`.
        case granted(duration: Duration?, priority: UInt8, urgency: FloorUrgency)
        /// Floor Taken: `holder` talks now (the granted party's identity), in a call of `urgency`; `mayRequest` is
        /// false in a broadcast call.
        case taken(by: Member, urgency: FloorUrgency, mayRequest: Bool)
        /// Floor Deny: the request is refused, for `cause`.
        case deny(FloorDenyCause)
        /// Floor Idle: nobody holds the floor.
        case idle
        /// Floor Revoke: the member's floor is taken back, for `cause`; its audio is refused (after T3's grace when
        /// the cause is ``FloorRevokeCause/mediaBurstTooLong``).
        case revoke(FloorRevokeCause)
        /// Floor Queue Position Info: the member waits at `position` (1: next) with its request's `priority`.
        case queuePosition(Int, priority: UInt8)
        /// The holder's talk time (T2) ends in `remaining`: not a TS 24.380 message (its phones count down the
        /// Floor Granted duration); sent ``FloorServerConfiguration/stopTalkingWarning`` ahead.
        case stopTalkingWarning(remaining: Duration)
    }

    /// One message and the member to send it to.
    public struct Delivery: Sendable, Hashable {
        /// Who gets the message.
        public let member: Member
        /// What it is told.
        public let message: Message

        /// `message` for `member`.
        public init(_ member: Member, _ message: Message) {
            self.member = member
            self.message = message
        }
    }

    /// What happened to the floor, for the application (its log, its own events); members learn from the
    /// ``Message``s.
    public enum Notice: Sendable, Hashable {
        /// `member` holds the floor now, on `request` (its urgency raised to the call's).
        case granted(Member, FloorRequest)
        /// `member` asked and waits at `position`.
        case queued(Member, position: Int)
        /// `member` asked and was refused, for `cause`.
        case denied(Member, FloorDenyCause)
        /// `member` no longer holds the floor, for `reason`. The floor is idle unless a `granted` follows.
        case released(Member, ReleaseReason)
        /// T4 (Inactivity) expired: the floor has been idle for ``FloorServerConfiguration/inactivity``.
        case inactive
        /// `member` kept sending after its floor was revoked and Floor Revoke was repeated
        /// ``FloorServerConfiguration/floorRevokeRepeats`` times: TS 24.380 leaves what follows to the server (it
        /// suggests disconnecting the member). Its audio stays refused.
        case revokeIgnored(Member)
    }

    /// Why a holder lost the floor.
    public enum ReleaseReason: Sendable, Hashable {
        /// It sent Floor Release.
        case released
        /// T1 (End of RTP media) expired: no audio for ``FloorServerConfiguration/endOfMedia``.
        case endOfMedia
        /// It talked for T2 (Stop talking) and, revoked, released or fell silent or ran out of T3's grace.
        case stopTalking
        /// A pre-emptive request from `by` took the floor.
        case preempted(by: Member)
        /// The application revoked it (``FloorServer/revoke(cause:now:)``) for `cause`.
        case revoked(FloorRevokeCause)
        /// It left the call.
        case left
    }

    /// What one input to the server produced: messages to send, in order; notices for the application; and when to
    /// call ``FloorServer/expire(now:)`` next.
    public struct Step: Sendable, Hashable {
        /// The messages to send, in order.
        public var messages: [Delivery] = []
        /// What happened, in order.
        public var notices: [Notice] = []
        /// When the server's earliest timer falls due (monotonic nanoseconds); nil when none is running.
        public var nextDeadline: UInt64?

        /// An empty step.
        public init() {}

        /// The messages for `member`, in order.
        public func messages(to member: Member) -> [Message] {
            messages.filter { $0.member == member }.map(\.message)
        }

        mutating func send(_ message: Message, to member: Member) {
            messages.append(Delivery(member, message))
        }
    }

    /// The floor's state: the states of TS 24.380's "general floor control operation" state machine.
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// Nobody holds the floor.
        case floorIdle = "G: Floor Idle"
        /// A member holds the floor; only its audio is forwarded.
        case floorTaken = "G: Floor Taken"
        /// The holder talked for T2 and was sent Floor Revoke; its audio is still forwarded until it releases, falls
        /// silent (T1) or T3's grace ends.
        case pendingFloorRevoke = "G: pending Floor Revoke"
    }

    /// A member's state: the states of TS 24.380's "basic floor control operation towards the floor participant".
    public enum ParticipantState: String, Sendable, Hashable, CaseIterable {
        /// It does not hold the floor, and nobody does.
        case notPermittedAndFloorIdle = "U: not permitted and Floor Idle"
        /// It does not hold the floor; another member does (it may wait in the queue).
        case notPermittedAndFloorTaken = "U: not permitted and Floor Taken"
        /// It holds the floor.
        case permitted = "U: permitted"
        /// It was sent Floor Revoke and has not released yet: its audio is refused (or, in T3's grace, still
        /// forwarded), and Floor Revoke is repeated (T8) while it keeps sending.
        case pendingFloorRevoke = "U: pending Floor Revoke"
    }

    /// The server's timers, named after TS 24.380's.
    public enum Timer: Sendable, Hashable {
        /// T1 (End of RTP media), while the floor is taken.
        case endOfMedia
        /// The warning ahead of T2 (not a TS 24.380 timer).
        case stopTalkingWarning
        /// T2 (Stop talking), while the floor is taken.
        case stopTalking
        /// T3 (Stop talking grace), in "G: pending Floor Revoke".
        case stopTalkingGrace
        /// T4 (Inactivity), while the floor is idle.
        case inactivity
        /// T7 (Floor Idle), while the floor is idle and Floor Idle is repeated.
        case floorIdle
        /// T8 (Floor Revoke) for one member in "U: pending Floor Revoke" whose audio is refused.
        case floorRevoke(Member)
        /// T20 (Floor Granted), until the holder's first frame while Floor Granted is repeated.
        case floorGranted
    }
}
