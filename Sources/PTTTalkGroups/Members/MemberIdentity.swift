import PTTTransport
import TransportCore

/// Who a talk-group member is: the user identity the app supplies when its phone joins (an account name, a unit
/// number), checked by the relay's authenticator. It is the member's key on the relay: presence, the floor's
/// talker, the wake hook and the events name members by it, whichever connection the user has now.
///
/// 1 to 64 bytes of UTF-8, without control characters.
public struct MemberIdentity: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The user identity, as the app supplied it.
    public let user: String

    /// The most UTF-8 bytes an identity may take.
    public static let maximumSize = 64

    /// An identity for `user`.
    ///
    /// - Throws: `talkGroupMalformed` when `user` is empty, longer than `maximumSize` bytes, or holds a control
    ///   character.
    public init(_ user: String) throws(TransportError) {
        let size = user.utf8.count
        guard size >= 1, size <= Self.maximumSize else {
            throw WireFields.malformed("a user identity is 1 to \(Self.maximumSize) bytes of UTF-8; got \(size)")
        }
        // Printable ASCII (most identities) holds no control character: the Unicode lookup only for the rest.
        guard
            user.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f })
                || !user.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw WireFields.malformed("a user identity holds no control characters")
        }
        self.user = user
    }

    /// The identity a member that joined a `RelayChannel` without one goes by: its connection's name.
    init(anonymous connection: TransportConnection.ID) { user = "\(connection)" }

    /// The user identity.
    public var description: String { user }

    /// Orders identities by their user string.
    public static func < (lhs: MemberIdentity, rhs: MemberIdentity) -> Bool { lhs.user < rhs.user }
}
