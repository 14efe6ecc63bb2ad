/// Where a server remembers which tickets carried 0-RTT (see <doc:RunningARelayInProduction>).
public enum AntiReplayBackend: Hashable, Sendable {
    /// In this process (the default): a ticket carries 0-RTT only at the process that issued it, and a restarted
    /// relay refuses 0-RTT for every ticket issued before it started.
    case inProcess
    /// A Redis (or Valkey) shared by every relay of a fleet: a first flight replayed to any relay, or to a
    /// restarted one, is refused, and a restarted relay accepts 0-RTT for tickets issued before it started.
    case redis(RedisAntiReplayStore)
}

/// A fleet's 0-RTT anti-replay store on Redis 7 or Valkey (RESP2 over TCP, no authentication, no TLS: keep it on
/// a private network or on loopback).
///
/// Each 0-RTT attempt costs one round trip to Redis on the relay's event loop (`SET key 1 NX PX ms`), at most
/// ``deadline``: when Redis is unreachable, slower than that, or answers with an error, the early data is
/// refused (fail closed: the handshake completes in 1-RTT, nothing is replayed) and the attempt is counted
/// (``TransportServer/antiReplayStatistics()``); 0-RTT returns by itself when Redis does.
public struct RedisAntiReplayStore: Hashable, Sendable {
    /// Redis' host name or address (resolved once, when the server starts).
    public var host: String
    /// Redis' TCP port (6379 by default).
    public var port: UInt16
    /// The database number (`SELECT`), 0 by default.
    public var database: Int
    /// How long one 0-RTT attempt may wait for Redis (5 ms by default). The event loop waits that long at most, so
    /// keep Redis near the relays: a round trip must fit in it with room to spare.
    public var deadline: Duration
    /// Prepended to every key ("ptt-0rtt:" by default): fleets sharing one Redis keep apart by their prefix.
    public var keyPrefix: String

    /// A store at `host`:`port`, database `database`.
    public init(
        host: String, port: UInt16 = 6379, database: Int = 0, deadline: Duration = .milliseconds(5),
        keyPrefix: String = "ptt-0rtt:"
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.deadline = deadline
        self.keyPrefix = keyPrefix
    }

    /// Parses `redis://HOST:PORT[/DB]` (IPv6 hosts in brackets; PORT defaults to 6379).
    ///
    /// - Throws: `invalidConfiguration` for another scheme, a bad port or database, or user information
    ///   (authentication is not supported).
    public init(url: String) throws {
        let scheme = "redis://"
        guard url.hasPrefix(scheme) else {
            throw TransportError(.invalidConfiguration, "an anti-replay store is redis://HOST:PORT[/DB], not \(url)")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let text = rest[rest.index(after: slash)...]
            guard let number = Int(text), number >= 0 else {
                throw TransportError(.invalidConfiguration, "bad Redis database number in \(url)")
            }
            database = number
            rest = rest[..<slash]
        }
        guard !rest.contains("@") else {
            throw TransportError(.invalidConfiguration, "Redis authentication is not supported: \(url)")
        }
        var host = rest
        var port: UInt16 = 6379
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let number = UInt16(rest[rest.index(after: colon)...]), number > 0 else {
                throw TransportError(.invalidConfiguration, "bad Redis port in \(url)")
            }
            port = number
            host = rest[..<colon]
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty else { throw TransportError(.invalidConfiguration, "no Redis host in \(url)") }
        self.init(host: String(host), port: port, database: database)
    }
}
