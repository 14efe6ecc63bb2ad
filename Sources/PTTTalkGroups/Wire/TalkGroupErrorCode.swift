import PTTTransport
import TransportCore

extension TransportError.Code {
    /// A talk-group control message, audio frame header or wake ticket that does not parse: truncated, a field too
    /// long, repeated or of the wrong form. Fix the sender; the relay answers with an error and holds nothing.
    public static let talkGroupMalformed = TransportError.Code("talk-group-malformed")
    /// A join whose credential the relay's authenticator refused (a forged or expired identity): the phone must
    /// get a fresh credential from its app server before joining again.
    public static let unauthenticated = TransportError.Code("unauthenticated")
    /// A catch-up for a burst the relay does not hold: it never existed here, or it ended and aged out of the
    /// buffer, or a newer burst replaced it. Join live instead (the next burst is heard from its start).
    public static let burstUnavailable = TransportError.Code("burst-unavailable")
    /// A catch-up from a sequence number the burst has not reached yet. Ask from a sequence already received (0:
    /// the burst's start).
    public static let sequenceInFuture = TransportError.Code("sequence-in-future")
    /// A wake address (platform and push token) larger than the relay accepts (`WakeAddress.maximumTokenSize`).
    public static let wakeAddressTooLarge = TransportError.Code("wake-address-too-large")
    /// A control message of a type this relay does not know (a newer phone?). The relay ignores it.
    public static let unknownMessage = TransportError.Code("talk-group-unknown-message")
    /// The relay refused a request for lack of resources (a full floor queue, too many groups or members).
    public static let noResources = TransportError.Code("no-resources")
    /// A wake ticket naming a relay other than the one a phone may use (another server name or port).
    public static let ticketForeignRelay = TransportError.Code("ticket-foreign-relay")
}

/// The error codes of the talk-group protocol's `error` message (`TalkGroupMessage.error`), each the wire form of a
/// `TransportError.Code`.
public enum TalkGroupErrorCode: UInt64, Sendable, CaseIterable {
    /// `talk-group-malformed`.
    case malformed = 1
    /// `unauthenticated`: the authenticator refused the identity.
    case unauthenticated = 2
    /// `not-a-member`: a catch-up, floor request or release for a group the user has not joined.
    case notAMember = 3
    /// `burst-unavailable`: the burst asked for is not held.
    case burstUnavailable = 4
    /// `sequence-in-future`: the catch-up starts beyond the burst's newest frame.
    case sequenceInFuture = 5
    /// `wake-address-too-large`.
    case wakeAddressTooLarge = 6
    /// `talk-group-unknown-message`.
    case unknownMessage = 7
    /// `no-resources`.
    case noResources = 8

    /// The `TransportError.Code` this wire code stands for.
    public var transportCode: TransportError.Code {
        switch self {
        case .malformed: .talkGroupMalformed
        case .unauthenticated: .unauthenticated
        case .notAMember: .notAMember
        case .burstUnavailable: .burstUnavailable
        case .sequenceInFuture: .sequenceInFuture
        case .wakeAddressTooLarge: .wakeAddressTooLarge
        case .unknownMessage: .unknownMessage
        case .noResources: .noResources
        }
    }

    /// The wire code of `code`, nil for a code the protocol does not carry.
    public init?(_ code: TransportError.Code) {
        guard let match = Self.allCases.first(where: { $0.transportCode == code }) else { return nil }
        self = match
    }
}
