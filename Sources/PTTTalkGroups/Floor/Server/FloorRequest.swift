/// A member's Floor Request to a ``FloorServer``: its floor priority, how urgent it is, and whether it may wait.
///
/// These are the fields of MCPTT's Floor Request message (3GPP TS 24.380): the Floor Priority (0–255, 255
/// highest) and the Floor Indicator's emergency and imminent-peril bits; `queueing` is the participant's
/// "queueing supported".
public struct FloorRequest: Sendable, Hashable {
    /// The floor priority, 0 (lowest) to 255 (highest). Orders the queue, and pre-empts the holder when the
    /// group's ``FloorServerConfiguration/preemptivePriority`` allows it.
    public var priority: UInt8
    /// Whether the request is for an emergency or an imminent-peril call; such a request pre-empts a less urgent
    /// holder.
    public var urgency: FloorUrgency
    /// Whether the member waits in the queue while the floor is taken (true), or wants an answer now: a request
    /// that may not wait is denied with ``FloorDenyCause/anotherMemberHasPermission`` while the floor is taken.
    public var queueing: Bool

    /// A request with `priority` (default 0), `urgency` (default normal) and `queueing` (default true).
    public init(priority: UInt8 = 0, urgency: FloorUrgency = .normal, queueing: Bool = true) {
        self.priority = priority
        self.urgency = urgency
        self.queueing = queueing
    }
}

/// How urgent a floor request or a call is: MCPTT's Floor Indicator bits "emergency call" and "imminent peril call"
/// (3GPP TS 24.380). Ordered: an emergency outranks an imminent peril, which outranks a normal call.
public enum FloorUrgency: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// A normal call.
    case normal = 0
    /// An imminent-peril call: pre-empts a normal holder.
    case imminentPeril = 1
    /// An emergency call: pre-empts a normal or imminent-peril holder.
    case emergency = 2

    /// Whether `lhs` is less urgent than `rhs`.
    public static func < (lhs: FloorUrgency, rhs: FloorUrgency) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The kind of group call a ``FloorServer`` controls: the MCPTT call types that change the floor's behaviour.
public enum FloorCallType: Sendable, Hashable, CaseIterable {
    /// A basic group call: requests are as urgent as they say.
    case basic
    /// A broadcast group call: one member speaks to the group, nobody waits for the floor or asks while it is
    /// taken (Floor Taken tells the others they may not request); join the members who only listen with
    /// ``FloorRole/receiveOnly`` so their requests are denied with ``FloorDenyCause/receiveOnly``.
    case broadcast
    /// An imminent-peril group call: every request counts as at least ``FloorUrgency/imminentPeril``.
    case imminentPeril
    /// An emergency group call: every request counts as ``FloorUrgency/emergency``.
    case emergency

    /// The least urgency of a request in a call of this type.
    var urgency: FloorUrgency {
        switch self {
        case .basic, .broadcast: .normal
        case .imminentPeril: .imminentPeril
        case .emergency: .emergency
        }
    }
}

/// Whether a member of a ``FloorServer`` may ask for the floor.
public enum FloorRole: Sendable, Hashable, CaseIterable {
    /// It may ask for the floor and talk, and hears the others.
    case transmitAndReceive
    /// It only listens: its requests are denied with ``FloorDenyCause/receiveOnly`` (reject cause #5).
    case receiveOnly
}
