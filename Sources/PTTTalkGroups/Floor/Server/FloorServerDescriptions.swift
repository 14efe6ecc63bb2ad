// How the floor server's values print: in TS 24.380's words, without module and type prefixes, for logs and
// command-line output.

extension FloorUrgency: CustomStringConvertible {
    /// "normal", "imminent peril" or "emergency".
    public var description: String {
        switch self {
        case .normal: "normal"
        case .imminentPeril: "imminent peril"
        case .emergency: "emergency"
        }
    }
}

extension FloorCallType: CustomStringConvertible {
    /// "basic", "broadcast", "imminent peril" or "emergency".
    public var description: String {
        switch self {
        case .basic: "basic"
        case .broadcast: "broadcast"
        case .imminentPeril: "imminent peril"
        case .emergency: "emergency"
        }
    }
}

extension FloorRole: CustomStringConvertible {
    /// "transmit and receive" or "receive only".
    public var description: String {
        switch self {
        case .transmitAndReceive: "transmit and receive"
        case .receiveOnly: "receive only"
        }
    }
}

extension FloorDenyCause: CustomStringConvertible {
    /// The cause's code and meaning (``meaning``), as "#7 queue full".
    public var description: String { "#\(code) \(meaning)" }
}

extension FloorRevokeCause: CustomStringConvertible {
    /// The cause's code and meaning, as "#4 media burst pre-empted".
    public var description: String {
        switch self {
        case .mediaBurstTooLong: "#2 media burst too long"
        case .preempted: "#4 media burst pre-empted"
        case .noResources: "#6 no resources"
        case .other: "#255 other"
        }
    }
}

extension FloorServer.State: CustomStringConvertible {
    /// TS 24.380's name of the state, as "G: Floor Idle".
    public var description: String { rawValue }
}

extension FloorServer.ParticipantState: CustomStringConvertible {
    /// TS 24.380's name of the state, as "U: permitted".
    public var description: String { rawValue }
}

extension FloorServer.ReleaseReason: CustomStringConvertible {
    /// "released", "end of media", "stop talking", "pre-empted by …", "revoked (…)" or "left".
    public var description: String {
        switch self {
        case .released: "released"
        case .endOfMedia: "end of media"
        case .stopTalking: "stop talking"
        case .preempted(let member): "pre-empted by \(member)"
        case .revoked(let cause): "revoked (\(cause))"
        case .left: "left"
        }
    }
}

extension FloorServer.Message: CustomStringConvertible {
    /// TS 24.380's name of the message with its fields, as "Floor Taken by alice (normal)".
    public var description: String {
        switch self {
        case .granted(let duration, let priority, let urgency):
            "Floor Granted (\(duration.map { "\($0)" } ?? "no limit"), priority \(priority), \(urgency))"
        case .taken(let holder, let urgency, let mayRequest):
            "Floor Taken by \(holder) (\(urgency)\(mayRequest ? "" : ", no requests"))"
        case .deny(let cause): "Floor Deny \(cause)"
        case .idle: "Floor Idle"
        case .revoke(let cause): "Floor Revoke \(cause)"
        case .queuePosition(let position, let priority): "Floor Queue Position Info \(position) (priority \(priority))"
        case .stopTalkingWarning(let remaining): "stop talking in \(remaining)"
        }
    }
}
