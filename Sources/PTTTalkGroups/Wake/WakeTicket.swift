import Foundation
import TransportCore

/// What a wake push carries so the woken phone goes straight to the relay holding the burst and asks for it in its
/// first flight: the group, the burst, and the relay's identity. The relay makes one per burst and hands it to the
/// `WakeSender` (`WakeRequest.ticket`); the gateway puts `base64URL` in the push payload; the phone passes it to
/// `TalkGroupPhone.wake(ticket:)`, which sends the join and the catch-up in 0-RTT.
///
/// Wire form (at most about 350 bytes; 60–80 in practice, well within APNs' 4 KB payload): the bytes `P` `W`, a
/// version byte `1`, then talk-group fields — group (key 1), burst ID (key 6, 8 bytes), the relay's server name
/// (key 21), port (key 22) and QUIC-LB server ID (key 23, when it has one). In a push payload it travels as
/// base64url without padding.
///
/// A ticket is not a credential: it names a burst, and the phone still joins with its own credential. A phone
/// follows only tickets naming the relay it is configured for (`TransportError.Code.ticketForeignRelay`).
public struct WakeTicket: Hashable, Sendable {
    /// The group the burst is in.
    public var group: String
    /// The burst.
    public var burst: UInt64
    /// The relay holding it.
    public var relay: RelayIdentity

    /// A ticket.
    public init(group: String, burst: UInt64, relay: RelayIdentity) {
        self.group = group
        self.burst = burst
        self.relay = relay
    }

    private static let magic: [UInt8] = [0x50, 0x57, 0x01]

    /// The ticket's bytes.
    public var encoded: [UInt8] {
        var fields = WireFields()
        fields.set(FieldKey.group, string: group)
        fields.set(FieldKey.burst, id: burst)
        fields.set(FieldKey.serverName, string: relay.serverName)
        fields.set(FieldKey.port, uint: UInt64(relay.port))
        if let id = relay.quicLBServerID { fields.set(FieldKey.quicLBServerID, bytes: id) }
        var bytes = Self.magic
        fields.encoded(into: &bytes)
        return bytes
    }

    /// The ticket as base64url without padding, for a push payload or a command line.
    public var base64URL: String {
        Data(encoded).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Parses a ticket's bytes.
    ///
    /// - Throws: `talkGroupMalformed` for anything but a version-1 ticket with a group, a burst ID, a server name
    ///   and a port in range.
    public init(decoding bytes: [UInt8]) throws(TransportError) {
        guard bytes.count <= 512, bytes.starts(with: Self.magic) else {
            throw WireFields.malformed("a wake ticket starts with \"PW\" and version 1 and is at most 512 bytes")
        }
        let fields = try WireFields(parsing: bytes[Self.magic.count...])
        let group = try WireFields.required(
            try fields.string(FieldKey.group, name: "the group", limit: TalkGroupMessage.maximumGroupSize), "the group")
        let burst = try WireFields.required(try fields.id(FieldKey.burst, name: "the burst ID"), "the burst ID")
        let name = try WireFields.required(
            try fields.string(FieldKey.serverName, name: "the relay's name", limit: 253), "the relay's name")
        let port = try WireFields.required(try fields.uint(FieldKey.port, name: "the port"), "the port")
        guard !group.isEmpty, !name.isEmpty, burst != 0, (1...65535).contains(port) else {
            throw WireFields.malformed("a wake ticket needs a group, a burst ID, a relay name and a port 1-65535")
        }
        let id = try fields.bytes(FieldKey.quicLBServerID, name: "the QUIC-LB server ID", limit: 15)
        self.init(
            group: group, burst: burst,
            relay: RelayIdentity(serverName: name, port: UInt16(port), quicLBServerID: id))
    }

    /// Parses a ticket from its base64url form (padding optional).
    ///
    /// - Throws: `talkGroupMalformed` when the text is not base64url or not a ticket.
    public init(base64URL text: String) throws(TransportError) {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        guard text.utf8.count <= 1024, let data = Data(base64Encoded: standard) else {
            throw WireFields.malformed("a wake ticket is base64url text")
        }
        try self.init(decoding: Array(data))
    }
}
