import PTTTransport
import TransportCore

extension TalkGroupMessage {
    /// The message's wire form: its type, then its fields (send it as one transport message).
    public func encoded() -> [UInt8] {
        var fields = WireFields()
        switch self {
        case .join(let join):
            fields.set(FieldKey.group, string: join.group)
            fields.set(FieldKey.user, string: join.user.user)
            if !join.credential.isEmpty { fields.set(FieldKey.credential, bytes: join.credential) }
            if let address = join.wakeAddress {
                fields.set(FieldKey.platform, uint: address.platform.rawValue)
                fields.set(FieldKey.pushToken, string: address.token)
            }
            if join.role == .receiveOnly { fields.set(FieldKey.role, uint: 1) }
            if join.revision > 1 { fields.set(FieldKey.revision, uint: join.revision) }
        case .catchUp(let group, let burst, let from):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.burst, id: burst)
            fields.set(FieldKey.from, uint: UInt64(from))
        case .requestFloor(let group, let priority, let emergency):
            fields.set(FieldKey.group, string: group)
            if priority != 0 { fields.set(FieldKey.priority, uint: UInt64(priority)) }
            if emergency { fields.set(FieldKey.floorFlags, uint: 1) }
        case .releaseFloor(let group), .leave(let group), .left(let group):
            fields.set(FieldKey.group, string: group)
        case .joined(let group, let user, let current):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.user, string: user.user)
            if let current {
                fields.set(FieldKey.burst, id: current.burst)
                fields.set(FieldKey.talker, string: current.talker.user)
                fields.set(FieldKey.next, uint: UInt64(current.next))
                fields.set(FieldKey.ended, uint: current.ended ? 1 : 0)
            }
        case .catchUpStarted(let group, let burst, let from, let next):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.burst, id: burst)
            fields.set(FieldKey.from, uint: UInt64(from))
            fields.set(FieldKey.next, uint: UInt64(next))
        case .floorGranted(let group, let burst):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.burst, id: burst)
        case .floorQueued(let group, let position):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.position, uint: position)
        case .floorDenied(let group, let holder, let cause):
            fields.set(FieldKey.group, string: group)
            if let holder { fields.set(FieldKey.talker, string: holder.user) }
            cause.write(into: &fields, causeKey: FieldKey.cause, retryAfterKey: FieldKey.retryAfter)
        case .floorTaken(let group, let burst, let talker):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.burst, id: burst)
            fields.set(FieldKey.talker, string: talker.user)
        case .floorReleased(let group, let burst, let talker, let reason):
            fields.set(FieldKey.group, string: group)
            fields.set(FieldKey.burst, id: burst)
            fields.set(FieldKey.talker, string: talker.user)
            fields.set(FieldKey.reason, uint: reason.wireValue)
        case .error(let request, let code, let message, let group):
            fields.set(FieldKey.request, uint: request)
            fields.set(FieldKey.code, uint: code.rawValue)
            fields.set(FieldKey.text, string: String(message.utf8.prefix(512)) ?? "")
            if let group { fields.set(FieldKey.group, string: group) }
        }
        var bytes: [UInt8] = []
        VarInt.encode(kind.rawValue, into: &bytes)
        fields.encoded(into: &bytes)
        return bytes
    }

    /// Parses one message (the bytes of one transport message).
    ///
    /// - Throws: `unknownMessage` for a type this version does not know (the `libraryCode` is the type);
    ///   `talkGroupMalformed` for a message too long, truncated, missing a field or with a field out of range;
    ///   `wakeAddressTooLarge` for a join whose push token is too long.
    public init(decoding bytes: [UInt8]) throws(TransportError) {
        guard bytes.count <= Self.maximumSize else {
            throw WireFields.malformed("a control message of \(bytes.count) bytes exceeds \(Self.maximumSize) bytes")
        }
        guard let (type, length) = VarInt.decode(bytes, at: 0) else {
            throw WireFields.malformed("an empty control message has no type")
        }
        guard let kind = Kind(rawValue: type) else {
            throw TransportError(
                .unknownMessage, "control message type \(type) is unknown to this version",
                libraryCode: Int(clamping: type))
        }
        let fields = try WireFields(parsing: bytes[length...])
        self = try Self.decode(kind, fields)
    }

    private static func decode(_ kind: Kind, _ fields: WireFields) throws(TransportError) -> TalkGroupMessage {
        func group() throws(TransportError) -> String {
            let name = try WireFields.required(
                try fields.string(FieldKey.group, name: "the group", limit: maximumGroupSize), "the group")
            guard !name.isEmpty else { throw WireFields.malformed("the group name is empty") }
            return name
        }
        func identity(_ key: UInt64, _ name: String) throws(TransportError) -> MemberIdentity {
            try MemberIdentity(
                try WireFields.required(try fields.string(key, name: name, limit: MemberIdentity.maximumSize), name))
        }
        func burst() throws(TransportError) -> UInt64 {
            try WireFields.required(try fields.id(FieldKey.burst, name: "the burst ID"), "the burst ID")
        }
        func sequence(_ key: UInt64, _ name: String) throws(TransportError) -> UInt32 {
            let value = try WireFields.required(try fields.uint(key, name: name), name)
            guard value <= UInt64(UInt32.max) else { throw WireFields.malformed("\(name) exceeds 2^32 - 1") }
            return UInt32(value)
        }
        switch kind {
        case .join:
            var address: WakeAddress?
            let platform = try fields.uint(FieldKey.platform, name: "the wake platform")
            let token = try fields.bytes(FieldKey.pushToken, name: "the push token", limit: .max)
            if let platform, let token {
                guard let known = WakeAddress.Platform(rawValue: platform) else {
                    throw WireFields.malformed("wake platform \(platform) is unknown")
                }
                address = try WakeAddress(platform: known, token: String(decoding: token, as: UTF8.self))
            } else if platform != nil || token != nil {
                throw WireFields.malformed("a wake address needs both its platform and its push token")
            }
            let credential =
                try fields.bytes(FieldKey.credential, name: "the credential", limit: maximumCredentialSize) ?? []
            let role: FloorRole
            switch try fields.uint(FieldKey.role, name: "the floor role") ?? 0 {
            case 0: role = .transmitAndReceive
            case 1: role = .receiveOnly
            case let other: throw WireFields.malformed("floor role \(other) is unknown (0 or 1)")
            }
            var join = JoinRequest(
                group: try group(), user: try identity(FieldKey.user, "the user"), credential: credential,
                wakeAddress: address, role: role)
            join.revision = try fields.uint(FieldKey.revision, name: "the protocol revision") ?? 1
            guard join.revision >= 1 else { throw WireFields.malformed("protocol revision 0 does not exist") }
            return .join(join)
        case .catchUp:
            return .catchUp(
                group: try group(), burst: try fields.id(FieldKey.burst, name: "the burst ID") ?? 0,
                from: try sequence(FieldKey.from, "the first sequence"))
        case .requestFloor:
            let priority = try fields.uint(FieldKey.priority, name: "the priority") ?? 0
            guard priority <= 255 else { throw WireFields.malformed("a floor priority is 0 to 255") }
            let flags = try fields.uint(FieldKey.floorFlags, name: "the floor flags") ?? 0
            return .requestFloor(group: try group(), priority: UInt8(priority), emergency: flags & 1 != 0)
        case .releaseFloor: return .releaseFloor(group: try group())
        case .leave: return .leave(group: try group())
        case .left: return .left(group: try group())
        case .joined:
            var current: BurstState?
            if fields.values[FieldKey.burst] != nil {
                current = BurstState(
                    burst: try burst(), talker: try identity(FieldKey.talker, "the talker"),
                    next: try sequence(FieldKey.next, "the next sequence"),
                    ended: (try fields.uint(FieldKey.ended, name: "the ended flag") ?? 0) != 0)
            }
            return .joined(group: try group(), user: try identity(FieldKey.user, "the user"), current: current)
        case .catchUpStarted:
            return .catchUpStarted(
                group: try group(), burst: try burst(), from: try sequence(FieldKey.from, "the first sequence"),
                next: try sequence(FieldKey.next, "the next sequence"))
        case .floorGranted: return .floorGranted(group: try group(), burst: try burst())
        case .floorQueued:
            return .floorQueued(
                group: try group(),
                position: try WireFields.required(
                    try fields.uint(FieldKey.position, name: "the position"), "the position"))
        case .floorDenied:
            return .floorDenied(
                group: try group(),
                holder: fields.values[FieldKey.talker] == nil ? nil : try identity(FieldKey.talker, "the holder"),
                cause: try FloorDenyCause(
                    reading: fields, causeKey: FieldKey.cause, retryAfterKey: FieldKey.retryAfter, defaultCode: 1))
        case .floorTaken:
            return .floorTaken(
                group: try group(), burst: try burst(), talker: try identity(FieldKey.talker, "the talker"))
        case .floorReleased:
            return .floorReleased(
                group: try group(), burst: try burst(), talker: try identity(FieldKey.talker, "the talker"),
                reason: try FloorReleaseReason(
                    wireValue: try WireFields.required(
                        try fields.uint(FieldKey.reason, name: "the reason"), "the reason")))
        case .error:
            let number = try WireFields.required(
                try fields.uint(FieldKey.code, name: "the error code"), "the error code")
            guard let code = TalkGroupErrorCode(rawValue: number) else {
                throw WireFields.malformed("error code \(number) is unknown")
            }
            return .error(
                request: try fields.uint(FieldKey.request, name: "the request type") ?? 0, code: code,
                message: try fields.string(FieldKey.text, name: "the error text", limit: 512) ?? "",
                group: fields.values[FieldKey.group] == nil ? nil : try group())
        }
    }

    /// The `TransportError` an `error` message carries (nil for any other message).
    public var transportError: TransportError? {
        guard case .error(let request, let code, let message, _) = self else { return nil }
        let name = Kind(rawValue: request).map { "\($0)" } ?? "message \(request)"
        return TransportError(code.transportCode, "the relay refused \(name): \(message)")
    }
}
