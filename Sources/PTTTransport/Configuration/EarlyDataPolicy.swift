/// A server's 0-RTT policy: whether it accepts early data, for how old a ticket, and when the application sees it
/// (see <doc:WakingASuspendedClient>).
public struct EarlyDataPolicy: Hashable, Sendable {
    /// Whether 0-RTT is accepted at all. When false every resumption runs in 1-RTT.
    public var isEnabled: Bool
    /// How long after it was issued a ticket can carry 0-RTT (6 hours by default). An older ticket still resumes
    /// TLS, in 1-RTT, with its early data refused (and re-sent by the client after the handshake); so does every
    /// ticket issued before the server started, or by another process. A longer window suits phones that sleep
    /// long; the anti-replay store holds each ticket's entry for this long, so the window and
    /// ``antiReplayCapacity`` together set the issuing rate the store sustains.
    public var window: Duration
    /// The 0-RTT ticket budget: the most tickets that may carry 0-RTT issued within one ``window`` (100,000 by
    /// default). Every ticket the server issues within the budget gets its anti-replay entry reserved at once,
    /// until its window ends, so it can carry 0-RTT once whatever other peers do; a ticket issued beyond the
    /// budget resumes in 1-RTT and its early data is refused. A flood of handshakes therefore spends only the
    /// budget of the tickets issued to the flood, never the 0-RTT of tickets already in clients' hands.
    ///
    /// Sizing: every completed handshake issues one ticket (QUIC) or two (TCP: GnuTLS sends two), so the budget
    /// is the ticket rate to sustain times the window: the default, over 6 hours, sustains about 4.6 tickets a
    /// second, e.g. 20,000 phones that each reconnect about every 70 minutes. Past that, the newest tickets of a
    /// window lose 0-RTT (their wakes take one more round trip) until older ones expire. Memory: about
    /// 150 bytes per entry (measured: see the README), allocated as tickets are issued: 100,000 entries take
    /// about 15 MB, and nothing a peer does makes the store grow beyond the budget.
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
    ///   handshake is confirmed. This is safe against replay because of the anti-replay store: a replayed
    ///   first flight has its early data refused, so its 0-RTT packets are never decrypted and deliver nothing.
    ///   That holds across a fleet of relays that share a ticket key too: a ticket carries 0-RTT only in the
    ///   process that issued it (see ``antiReplayCapacity``), so a first flight replayed to another instance is
    ///   refused there.
    public var deliverEarlyDatagrams: Bool

    /// 0-RTT refused.
    public static let disabled = EarlyDataPolicy(
        isEnabled: false, window: .zero, antiReplayCapacity: 0,
        deliverBeforeHandshake: false)

    /// 0-RTT accepted with a real anti-replay store.
    ///
    /// - Parameters:
    ///   - window: how long after it was issued a ticket can carry 0-RTT.
    ///   - antiReplayCapacity: the 0-RTT ticket budget: tickets issued with 0-RTT per window (see
    ///     ``antiReplayCapacity``).
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
    ///   - window: how long after it was issued a ticket can carry 0-RTT.
    ///   - antiReplayCapacity: the 0-RTT ticket budget: tickets issued with 0-RTT per window.
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

    /// The window in whole seconds (at least one), as the anti-replay store takes it.
    var windowSeconds: Int64 { max(1, window.components.seconds) }

    /// The window in milliseconds, as the TLS context takes it (nil when disabled).
    var windowMilliseconds: UInt32? {
        guard isEnabled else { return nil }
        return UInt32(clamping: window.nanoseconds / 1_000_000)
    }
}
