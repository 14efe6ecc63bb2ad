import PTTTransport
import TransportCore

/// What two relays say on a trunk's control stream (one transport message each: a type, then `WireFields`).
///
/// The dialer opens the stream with `hello`; the acceptor answers `challenge`; the dialer proves the fleet secret
/// with `proof`; the acceptor answers `welcome`. Only then does either side send the rest: which groups it follows,
/// floor requests forwarded to a group's home, and the home's floor decisions.
///
/// A fleet runs two versions side by side during a rolling upgrade, so a reader skips the keys it does not know
/// (`WireFields`) and every field added since the first revision is optional: `hello` and `challenge` say the
/// sender's ``revision`` (none: 1), a floor request's role is absent for a talker (a first-revision relay never
/// sends it), a denial names a holder only when one holds the floor. What a relay does for a peer of the first
/// revision is said where it differs (`TalkGroupRelay+Trunks.swift`).
package enum TrunkMessage: Equatable, Sendable {
    /// Dialer → acceptor: who dials, and the trunk revision it speaks.
    case hello(relay: String, revision: UInt64 = TrunkMessage.revision)
    /// Acceptor → dialer: who accepts, a fresh random challenge, and the trunk revision it speaks.
    case challenge(relay: String, nonce: [UInt8], revision: UInt64 = TrunkMessage.revision)
    /// Dialer → acceptor: HMAC-SHA256(secret, proof label ‖ challenge ‖ names) (`TrunkProof`), and during a
    /// rotation the same under the previous secret after it (64 bytes).
    case proof(mac: [UInt8])
    /// Acceptor → dialer: the proof holds; the trunk is up.
    case welcome
    /// The sender has members of `group`: send it the group's audio and floor notices.
    case follow(group: String)
    /// The sender has no more members of `group`.
    case unfollow(group: String)
    /// A member of the sender, `user` in `role`, asks the home for `group`'s floor: the home's floor decides, a
    /// receive-only member included (#5).
    case floorRequest(
        group: String, user: MemberIdentity, role: FloorRole = .transmitAndReceive, priority: UInt8, emergency: Bool)
    /// A member of the sender releases `group`'s floor, or leaves its line (or left the group).
    case floorRelease(group: String, user: MemberIdentity)
    /// The home granted `group`'s floor to `talker` for `burst`.
    case floorTaken(group: String, burst: UInt64, talker: MemberIdentity)
    /// The home took back `group`'s floor from `talker` (`burst` ended).
    case floorReleased(group: String, burst: UInt64, talker: MemberIdentity, reason: FloorReleaseReason)
    /// The home queued `user` at `position`.
    case floorQueued(group: String, user: MemberIdentity, position: UInt64)
    /// The home denied `user` for `cause` (with its retry-after time for #4) while `holder` talks (nil: nobody).
    ///
    /// A first-revision relay requires a holder and named the requester for nobody: a denial for such a peer is
    /// sent with `holder` set to `user` (`forFirstRevision`), and one received naming the requester reads as nil.
    case floorDenied(group: String, user: MemberIdentity, holder: MemberIdentity?, cause: FloorDenyCause)

    /// The largest control message accepted on a trunk.
    package static let maximumSize = 1024

    /// The trunk revision this relay speaks: 2. Revision 1 (no revision field) carried no role in a floor request,
    /// so its member relays denied receive-only members themselves, and required a holder in every denial.
    package static let revision: UInt64 = 2

    /// This message as a peer of `revision` reads it: a denial naming nobody names the requester for a
    /// first-revision peer (which requires a holder and reads the requester as nobody); anything else as it is.
    package func forPeer(of revision: UInt64) -> TrunkMessage {
        guard revision < 2, case .floorDenied(let group, let user, nil, let cause) = self else { return self }
        return .floorDenied(group: group, user: user, holder: user, cause: cause)
    }

    private enum Kind: UInt64 {
        case hello = 1
        case challenge = 2
        case proof = 3
        case welcome = 4
        case follow = 10
        case unfollow = 11
        case floorRequest = 20
        case floorRelease = 21
        case floorTaken = 30
        case floorReleased = 31
        case floorQueued = 32
        case floorDenied = 33
    }

    private enum Key {
        static let group: UInt64 = 1
        static let user: UInt64 = 2
        static let relay: UInt64 = 3
        static let nonce: UInt64 = 4
        static let mac: UInt64 = 5
        static let burst: UInt64 = 6
        static let priority: UInt64 = 8
        static let emergency: UInt64 = 9
        static let talker: UInt64 = 10
        static let position: UInt64 = 14
        static let cause: UInt64 = 16
        static let reason: UInt64 = 17
        static let retryAfter: UInt64 = 18
        static let role: UInt64 = 24
        static let revision: UInt64 = 25
    }

    /// The wire form: the type, then the fields.
    package func encoded() -> [UInt8] {
        var fields = WireFields()
        let kind: Kind
        switch self {
        case .hello(let relay, let revision):
            kind = .hello
            fields.set(Key.relay, string: relay)
            if revision > 1 { fields.set(Key.revision, uint: revision) }
        case .challenge(let relay, let nonce, let revision):
            kind = .challenge
            fields.set(Key.relay, string: relay)
            fields.set(Key.nonce, bytes: nonce)
            if revision > 1 { fields.set(Key.revision, uint: revision) }
        case .proof(let mac):
            kind = .proof
            fields.set(Key.mac, bytes: mac)
        case .welcome:
            kind = .welcome
        case .follow(let group):
            kind = .follow
            fields.set(Key.group, string: group)
        case .unfollow(let group):
            kind = .unfollow
            fields.set(Key.group, string: group)
        case .floorRequest(let group, let user, let role, let priority, let emergency):
            kind = .floorRequest
            fields.set(Key.group, string: group)
            fields.set(Key.user, string: user.user)
            if role == .receiveOnly { fields.set(Key.role, uint: 1) }
            fields.set(Key.priority, uint: UInt64(priority))
            fields.set(Key.emergency, uint: emergency ? 1 : 0)
        case .floorRelease(let group, let user):
            kind = .floorRelease
            fields.set(Key.group, string: group)
            fields.set(Key.user, string: user.user)
        case .floorTaken(let group, let burst, let talker):
            kind = .floorTaken
            fields.set(Key.group, string: group)
            fields.set(Key.burst, id: burst)
            fields.set(Key.talker, string: talker.user)
        case .floorReleased(let group, let burst, let talker, let reason):
            kind = .floorReleased
            fields.set(Key.group, string: group)
            fields.set(Key.burst, id: burst)
            fields.set(Key.talker, string: talker.user)
            fields.set(Key.reason, uint: reason.wireValue)
        case .floorQueued(let group, let user, let position):
            kind = .floorQueued
            fields.set(Key.group, string: group)
            fields.set(Key.user, string: user.user)
            fields.set(Key.position, uint: position)
        case .floorDenied(let group, let user, let holder, let cause):
            kind = .floorDenied
            fields.set(Key.group, string: group)
            fields.set(Key.user, string: user.user)
            if let holder { fields.set(Key.talker, string: holder.user) }
            cause.write(into: &fields, causeKey: Key.cause, retryAfterKey: Key.retryAfter)
        }
        var bytes: [UInt8] = []
        VarInt.encode(kind.rawValue, into: &bytes)
        fields.encoded(into: &bytes)
        return bytes
    }

    /// Parses one trunk control message.
    ///
    /// - Throws: `trunkRefused` for anything that is not one (unknown type, missing or oversized field, too long).
    package init(decoding bytes: [UInt8]) throws(TransportError) {
        guard bytes.count <= Self.maximumSize else {
            throw Self.refused("a trunk message of \(bytes.count) bytes (at most \(Self.maximumSize))")
        }
        guard let (type, length) = VarInt.decode(bytes, at: 0), let kind = Kind(rawValue: type) else {
            throw Self.refused("not a trunk message (unknown type)")
        }
        let fields: WireFields
        do {
            fields = try WireFields(parsing: bytes[length...])
        } catch {
            throw Self.refused("a malformed trunk message: \(error.message)")
        }
        do throws(TransportError) {
            self = try Self.make(kind, fields)
        } catch {
            throw Self.refused("a malformed trunk message: \(error.message)")
        }
    }

    private static func make(_ kind: Kind, _ fields: WireFields) throws(TransportError) -> TrunkMessage {
        func string(_ key: UInt64, _ name: String) throws(TransportError) -> String {
            try WireFields.required(try fields.string(key, name: name, limit: 64), name)
        }
        func group() throws(TransportError) -> String { try string(Key.group, "the group") }
        func member(_ key: UInt64, _ name: String) throws(TransportError) -> MemberIdentity {
            try MemberIdentity(try string(key, name))
        }
        func uint(_ key: UInt64, _ name: String) throws(TransportError) -> UInt64 {
            try WireFields.required(try fields.uint(key, name: name), name)
        }
        func id(_ key: UInt64, _ name: String) throws(TransportError) -> UInt64 {
            try WireFields.required(try fields.id(key, name: name), name)
        }
        // Absent: a first-revision relay.
        func revision() throws(TransportError) -> UInt64 {
            max(1, try fields.uint(Key.revision, name: "the trunk revision") ?? 1)
        }
        switch kind {
        case .hello: return .hello(relay: try string(Key.relay, "the relay"), revision: try revision())
        case .challenge:
            let nonce = try WireFields.required(try fields.bytes(Key.nonce, name: "the nonce", limit: 64), "the nonce")
            return .challenge(relay: try string(Key.relay, "the relay"), nonce: nonce, revision: try revision())
        case .proof:
            return .proof(
                mac: try WireFields.required(try fields.bytes(Key.mac, name: "the MAC", limit: 64), "the MAC"))
        case .welcome: return .welcome
        case .follow: return .follow(group: try group())
        case .unfollow: return .unfollow(group: try group())
        case .floorRequest:
            // No role: a talker (a first-revision relay sends none). A role this revision does not know asks for
            // more than listening, which it cannot grant knowingly: read as receive-only, the trunk stays up.
            let role: FloorRole =
                (try fields.uint(Key.role, name: "the floor role") ?? 0) == 0 ? .transmitAndReceive : .receiveOnly
            return .floorRequest(
                group: try group(), user: try member(Key.user, "the user"), role: role,
                priority: UInt8(clamping: try uint(Key.priority, "the priority")),
                emergency: try uint(Key.emergency, "the emergency flag") != 0)
        case .floorRelease: return .floorRelease(group: try group(), user: try member(Key.user, "the user"))
        case .floorTaken:
            return .floorTaken(
                group: try group(), burst: try id(Key.burst, "the burst"), talker: try member(Key.talker, "the talker"))
        case .floorReleased:
            return .floorReleased(
                group: try group(), burst: try id(Key.burst, "the burst"), talker: try member(Key.talker, "the talker"),
                reason: try FloorReleaseReason(wireValue: try uint(Key.reason, "the reason")))
        case .floorQueued:
            return .floorQueued(
                group: try group(), user: try member(Key.user, "the user"),
                position: try uint(Key.position, "the position"))
        case .floorDenied:
            let user = try member(Key.user, "the user")
            // A first-revision home names the requester when nobody holds the floor.
            let named = fields.values[Key.talker] == nil ? nil : try member(Key.talker, "the holder")
            return .floorDenied(
                group: try group(), user: user, holder: named == user ? nil : named,
                cause: try FloorDenyCause(
                    reading: fields, causeKey: Key.cause, retryAfterKey: Key.retryAfter, defaultCode: nil))
        }
    }

    static func refused(_ what: String) -> TransportError {
        TransportError(
            .trunkRefused, "\(what); a trunk speaks ptt-trunk/1 and proves the fleet secret first")
    }
}

/// The proof a dialing relay gives of the fleet secret: HMAC-SHA256(secret, label ‖ challenge ‖ acceptor ‖ dialer),
/// each name prefixed by its length, so a proof answers one challenge of one acceptor for one dialer.
enum TrunkProof {
    /// The proof for `nonce`, from `dialer` to `acceptor`; nil when GnuTLS fails.
    static func mac(secret: [UInt8], nonce: [UInt8], acceptor: String, dialer: String) -> [UInt8]? {
        var message = Array("ptt-trunk/1 proof".utf8)
        VarInt.encode(UInt64(nonce.count), into: &message)
        message += nonce
        for name in [acceptor, dialer] {
            VarInt.encode(UInt64(name.utf8.count), into: &message)
            message += Array(name.utf8)
        }
        return HMACSHA256.mac(key: secret, message: message)
    }

    /// Whether `mac` proves `secret` for this challenge and these names.
    static func holds(
        _ mac: [UInt8], secret: [UInt8], nonce: [UInt8], acceptor: String, dialer: String
    ) -> Bool {
        guard let expected = Self.mac(secret: secret, nonce: nonce, acceptor: acceptor, dialer: dialer) else {
            return false
        }
        return HMACSHA256.equal(mac, expected)
    }

    /// The proof field a dialer holding `secrets` (its current fleet secret, then the previous one during a
    /// rotation) sends: one MAC per secret, one after the other; nil when GnuTLS fails.
    static func macs(secrets: [[UInt8]], nonce: [UInt8], acceptor: String, dialer: String) -> [UInt8]? {
        var field: [UInt8] = []
        for secret in secrets.prefix(2) {
            guard let mac = mac(secret: secret, nonce: nonce, acceptor: acceptor, dialer: dialer) else { return nil }
            field += mac
        }
        return field
    }

    /// Whether one of the MACs in `field` (one or two of 32 bytes) proves one of `secrets` — the acceptor's current
    /// and previous fleet secrets — for this challenge and these names: during a rotation a relay still on the old
    /// secret and one already on the new one admit each other, whichever dials. Any other length proves nothing.
    static func holds(
        field: [UInt8], secrets: [[UInt8]], nonce: [UInt8], acceptor: String, dialer: String
    ) -> Bool {
        let length = TrunkConfiguration.secretLength
        guard field.count == length || field.count == 2 * length else { return false }
        var proven = false
        for start in stride(from: 0, to: field.count, by: length) {
            let mac = Array(field[start..<start + length])
            for secret in secrets.prefix(2)
            where holds(mac, secret: secret, nonce: nonce, acceptor: acceptor, dialer: dialer) {
                proven = true
            }
        }
        return proven
    }
}
