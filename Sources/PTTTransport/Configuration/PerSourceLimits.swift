import TransportCore

/// How many QUIC connections one client address may hold and how fast it may open new ones, so that a single
/// source cannot fill a relay's connection table or keep its handshake machinery busy.
///
/// A source is an IPv4 address, or an IPv6 /64 (one subscriber line: a host can hop addresses within its /64 at
/// will). Clients that have proven their address (a Retry, or a NEW_TOKEN from an earlier connection) and clients
/// that have not are counted separately, each against these limits: Initials forging an office's address can
/// then only use up the second budget, and the phones behind it still get in after one Retry.
///
/// Over its budget, a client without a validated address gets a Retry (stateless, smaller than its Initial, and
/// proves the address is not spoofed); a client with one is refused with CONNECTION_REFUSED, which a
/// `TransportClient` reports as `TransportError.Code.connectionRefused` with the reason ("too many connections
/// from this address" or "too many new connections from this address").
///
/// The defaults never bother a NATed office of phones, where hundreds of phones share one public address: an
/// office of 500 phones that all reconnect at once (relay restart, Wi-Fi outage) fits the burst, each phone may
/// hold two connections while it hands over between networks, and 50 new connections per second is far more than
/// phones reconnecting after network changes ever need. One abusive address still holds at most
/// 2 × `maxConnections` (validated and not) of a relay's table, and opens at most 2 × `newConnectionsPerSecond`.
public struct PerSourceLimits: Sendable, Hashable {
    /// Live connections from one source (per budget: validated and not). Default 1000.
    public var maxConnections: Int
    /// New connections per second one source may open, sustained (per budget). Default 50.
    public var newConnectionsPerSecond: Int
    /// New connections one source may open at once before `newConnectionsPerSecond` applies (per budget).
    /// Default 500.
    public var burst: Int

    /// Limits for one source; every value must be at least 1.
    public init(maxConnections: Int = 1000, newConnectionsPerSecond: Int = 50, burst: Int = 500) {
        self.maxConnections = maxConnections
        self.newConnectionsPerSecond = newConnectionsPerSecond
        self.burst = burst
    }

    var core: SourceLimits {
        SourceLimits(maxLive: maxConnections, perSecond: newConnectionsPerSecond, burst: burst)
    }
}
