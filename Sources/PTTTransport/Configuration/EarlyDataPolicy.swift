/// A server's 0-RTT policy: whether it accepts early data, for how old a ticket, and when the application sees it
/// (see <doc:WakingASuspendedClient>).
public struct EarlyDataPolicy: Hashable, Sendable {
    /// Whether 0-RTT is accepted at all. When false every resumption runs in 1-RTT.
    public var isEnabled: Bool
    /// How long a ticket stays usable for 0-RTT. GnuTLS refuses 0-RTT for tickets older than the window and for
    /// every ticket issued before the server started; those clients get 1-RTT resumption instead. A longer window
    /// suits phones that sleep long, at the cost of anti-replay memory (about 100 bytes per 0-RTT attempt).
    public var window: Duration
    /// The most 0-RTT attempts remembered within the window; beyond it 0-RTT is refused (fail closed).
    public var antiReplayCapacity: Int
    /// Hand connections to the application as soon as they are accepted, so it can answer replay-safe requests
    /// at 0.5-RTT. Stream data carries `isEarly`; early datagrams are still held until the handshake completes
    /// unless ``deliverEarlyDatagrams`` is set. When false (the default) the application sees a connection, and its
    /// early data, once the handshake is done.
    public var deliverBeforeHandshake: Bool
    /// Deliver datagrams that arrived in 0-RTT at once (each flagged ``Datagram/isEarly``) instead of holding them
    /// until the handshake completes, so a woken talker's first audio frames reach a `RelayChannel` (and are
    /// forwarded) at 0.5-RTT rather than one round trip later. Implies ``deliverBeforeHandshake`` (the
    /// application needs the connection to receive them). Off by default.
    ///
    /// - Important: Early datagrams can be forwarded before the client proved it owns its address and before the
    ///   handshake is confirmed. This is safe against replay only because of the anti-replay store: a replayed
    ///   first flight has its early data refused, so its 0-RTT packets are never decrypted and deliver nothing.
    ///   That store lives in one process. A fleet of relays that share a ticket key (several processes or
    ///   hosts) does not share it: a first flight captured on its way to one relay and replayed to another is
    ///   accepted there once, and its early audio is played again. Turn this on only where one relay process
    ///   holds the ticket key, or where replaying a few frames of audio is acceptable.
    public var deliverEarlyDatagrams: Bool

    /// 0-RTT refused.
    public static let disabled = EarlyDataPolicy(
        isEnabled: false, window: .zero, antiReplayCapacity: 0,
        deliverBeforeHandshake: false)

    /// 0-RTT accepted with a real anti-replay store.
    ///
    /// - Parameters:
    ///   - window: how long a ticket stays usable for 0-RTT.
    ///   - antiReplayCapacity: the most 0-RTT attempts remembered within the window.
    ///   - deliverBeforeHandshake: hand connections (and early stream data) to the application at 0.5-RTT.
    ///   - deliverEarlyDatagrams: also deliver 0-RTT datagrams at once instead of holding them (see
    ///     ``deliverEarlyDatagrams`` for when that is safe).
    public static func enabled(
        window: Duration = .seconds(6 * 3600), antiReplayCapacity: Int = 100_000,
        deliverBeforeHandshake: Bool = false, deliverEarlyDatagrams: Bool = false
    ) -> EarlyDataPolicy {
        EarlyDataPolicy(
            isEnabled: true, window: window, antiReplayCapacity: antiReplayCapacity,
            deliverBeforeHandshake: deliverBeforeHandshake, deliverEarlyDatagrams: deliverEarlyDatagrams)
    }

    /// A policy with every field given; ``disabled`` and
    /// ``enabled(window:antiReplayCapacity:deliverBeforeHandshake:deliverEarlyDatagrams:)`` are the usual ways to
    /// make one.
    ///
    /// - Parameters:
    ///   - isEnabled: whether 0-RTT is accepted at all.
    ///   - window: how long a ticket stays usable for 0-RTT.
    ///   - antiReplayCapacity: the most 0-RTT attempts remembered within the window.
    ///   - deliverBeforeHandshake: hand connections to the application before their handshake completed.
    ///   - deliverEarlyDatagrams: deliver 0-RTT datagrams at once instead of holding them to the handshake's end.
    public init(
        isEnabled: Bool, window: Duration, antiReplayCapacity: Int, deliverBeforeHandshake: Bool,
        deliverEarlyDatagrams: Bool = false
    ) {
        self.isEnabled = isEnabled
        self.window = window
        self.antiReplayCapacity = antiReplayCapacity
        self.deliverBeforeHandshake = deliverBeforeHandshake
        self.deliverEarlyDatagrams = deliverEarlyDatagrams
    }

    /// Whether the server hands connections to the application before their handshake completed.
    var handsOutEarly: Bool { deliverBeforeHandshake || deliverEarlyDatagrams }

    /// The window in milliseconds, as GnuTLS takes it (nil when disabled).
    var windowMilliseconds: UInt32? {
        guard isEnabled else { return nil }
        return UInt32(clamping: window.nanoseconds / 1_000_000)
    }
}
