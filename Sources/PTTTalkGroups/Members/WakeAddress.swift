import TransportCore

/// Where a suspended member is woken: its phone's platform and the push token the phone registered (on iOS the
/// ephemeral PushToTalk token of the channel it joined; on Android its FCM registration token). Opaque to the
/// relay: it only hands it to the app's `WakeSender`.
public struct WakeAddress: Hashable, Sendable {
    /// Which push service reaches the phone.
    public enum Platform: UInt64, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// Apple Push Notification service, `pushtotalk` pushes (iOS 16+ PushToTalk).
        case apns = 1
        /// Firebase Cloud Messaging, high priority.
        case fcm = 2
        /// Another gateway of the app's own (Local Push Connectivity, a test emulator).
        case other = 3

        /// `apns`, `fcm` or `other`, as in the wake hook's JSON.
        public var description: String {
            switch self {
            case .apns: "apns"
            case .fcm: "fcm"
            case .other: "other"
            }
        }
    }

    /// The push service.
    public let platform: Platform
    /// The push token, as the phone registered it (printable ASCII: APNs tokens in hex, FCM tokens as issued).
    public let token: String

    /// The largest token a relay accepts, in bytes (APNs tokens are 64 hex digits, FCM tokens about 160
    /// characters): a member's wake address costs the relay at most this much memory.
    public static let maximumTokenSize = 512

    /// A wake address.
    ///
    /// - Throws: `wakeAddressTooLarge` for a token longer than `maximumTokenSize` bytes; `talkGroupMalformed` for
    ///   an empty one or one with bytes outside printable ASCII.
    public init(platform: Platform, token: String) throws(TransportError) {
        let size = token.utf8.count
        guard size <= Self.maximumTokenSize else {
            throw TransportError(
                .wakeAddressTooLarge,
                "a push token of \(size) bytes exceeds the relay's limit of \(Self.maximumTokenSize) bytes")
        }
        guard size > 0, token.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw WireFields.malformed("a push token is 1 or more bytes of printable ASCII")
        }
        self.platform = platform
        self.token = token
    }
}
