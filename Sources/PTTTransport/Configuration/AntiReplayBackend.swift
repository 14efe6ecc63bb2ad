import TransportCore
import TransportIO

/// Where a server remembers which tickets carried 0-RTT (see <doc:RunningARelayInProduction>).
public enum AntiReplayBackend: Hashable, Sendable {
    /// In this process (the default): a ticket carries 0-RTT only at the process that issued it, and a restarted
    /// relay refuses 0-RTT for every ticket issued before it started.
    case inProcess
    /// A Redis (or Valkey) shared by every relay of a fleet: a first flight replayed to any relay, or to a
    /// restarted one, is refused, and a restarted relay accepts 0-RTT for tickets issued before it started. No
    /// loss of Redis' keys (a flush, an eviction, a restart, a failover) lets a used ticket carry 0-RTT again, and
    /// the event loop never waits for Redis (see ``RedisAntiReplayStore``).
    case redis(RedisAntiReplayStore)
}

/// A fleet's 0-RTT anti-replay store on Redis 7 or Valkey (RESP2 over TCP, or over TLS with ``usesTLS``; AUTH with
/// ``username`` and ``password``).
///
/// Each 0-RTT attempt costs one round trip to Redis (one atomic script that proves the store still holds its memory
/// and claims the ticket), at most ``deadline``, which the event loop never waits for: the attempt's first flight
/// is held while the claim is in flight, and every other client is served meanwhile. When Redis is unreachable,
/// slower than the deadline, answers with an error, or has lost its memory (flushed, evicted, restarted, failed
/// over), the early data is refused (fail closed: the handshake completes in 1-RTT, nothing is replayed) and the
/// attempt is counted by reason (``TransportServer/antiReplayStatistics()``); 0-RTT returns by itself when Redis
/// does. See <doc:RunningARelayInProduction>.
public struct RedisAntiReplayStore: Hashable, Sendable {
    /// Redis' host name or address (resolved once, when the server starts).
    public var host: String
    /// Redis' TCP port (6379 by default).
    public var port: UInt16
    /// The database number (`SELECT`), 0 by default.
    public var database: Int
    /// How long one 0-RTT attempt may wait for Redis' answer (20 ms by default): its own round trip, never a
    /// reconnect (while the relay reconnects, attempts are refused at once). Only the waking phone waits, its first
    /// flight held; past the deadline it wakes in 1-RTT, which costs it one round trip to the relay — so keep the
    /// deadline below a phone's round trip, and Redis near the relays (a round trip of a few milliseconds).
    public var deadline: Duration
    /// Prepended to every key ("ptt-0rtt:" by default): fleets sharing one Redis keep apart by their prefix.
    public var keyPrefix: String
    /// How far apart the relays' wall clocks may be (2 s by default; keep them on NTP): a key outlives the 0-RTT
    /// window by this much, and after Redis lost its memory, tickets issued up to this long after are refused
    /// 0-RTT too. A replay could get through only between relays whose clocks differ by more.
    public var clockSkewAllowance: Duration

    /// The ACL user to authenticate as (`redis://USER@HOST:PORT`; nil: the default user).
    public var username: String?
    /// The password to authenticate with (`AUTH`), when the store requires one: from a file or the environment,
    /// never from the URL or the command line (`serve --anti-replay-password-file FILE` or `PTT_REDIS_PASSWORD`).
    public var password: String?

    /// Whether the connections to Redis run TLS (`rediss://`, Redis' `tls-port`): the server's certificate is
    /// always verified against ``trust`` and must name ``host``. False by default (`redis://`).
    public var usesTLS = false
    /// The CAs Redis' certificate must chain to when ``usesTLS`` (`serve --redis-ca FILE`; the system store by
    /// default).
    public var trust: TrustRoots = .system
    /// The relay's certificate chain (a PEM file) presented to a Redis that asks for one when ``usesTLS`` (mutual
    /// TLS: Redis' `tls-auth-clients yes` with its `tls-ca-cert-file`; `serve --redis-cert FILE`), with
    /// ``clientKeyFile``; nil: none. Both files are read when the relay starts.
    public var clientCertificateFile: String?
    /// The private key (a PEM file) of ``clientCertificateFile`` (`serve --redis-key FILE`).
    public var clientKeyFile: String?

    /// A store at `host`:`port`, database `database`.
    public init(
        host: String, port: UInt16 = 6379, database: Int = 0, deadline: Duration = .milliseconds(20),
        keyPrefix: String = "ptt-0rtt:", clockSkewAllowance: Duration = .seconds(2)
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.deadline = deadline
        self.keyPrefix = keyPrefix
        self.clockSkewAllowance = clockSkewAllowance
    }

    /// Parses `redis://HOST:PORT[/DB][?deadline-ms=N&clock-skew-ms=N]` (IPv6 hosts in brackets; PORT defaults to
    /// 6379; the options set ``deadline`` and ``clockSkewAllowance``), or the same with `rediss://` for TLS
    /// (``usesTLS``; verified against ``trust``, which the URL does not set).
    ///
    /// `redis://USER@HOST:PORT` (or `USER:@`) names the ACL user to authenticate as; a password in the URL is
    /// refused (it would show in the process list): set ``password``.
    ///
    /// - Throws: `invalidConfiguration` for another scheme, a bad port, database or option, or a password in the
    ///   URL.
    public init(url: String) throws {
        let tls = url.hasPrefix("rediss://")
        let scheme = tls ? "rediss://" : "redis://"
        guard url.hasPrefix(scheme) else {
            throw TransportError(
                .invalidConfiguration, "an anti-replay store is redis://HOST:PORT[/DB] or rediss://…, not \(url)")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var options: [Substring: Int64] = [:]
        if let question = rest.firstIndex(of: "?") {
            for option in rest[rest.index(after: question)...].split(separator: "&") {
                let pair = option.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, ["deadline-ms", "clock-skew-ms"].contains(pair[0]),
                    let value = Int64(pair[1]), value >= 0, value <= 3_600_000
                else { throw TransportError(.invalidConfiguration, "bad Redis option \(option) in \(url)") }
                options[pair[0]] = value
            }
            rest = rest[..<question]
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let text = rest[rest.index(after: slash)...]
            guard let number = Int(text), number >= 0 else {
                throw TransportError(.invalidConfiguration, "bad Redis database number in \(url)")
            }
            database = number
            rest = rest[..<slash]
        }
        var username: String?
        if let at = rest.lastIndex(of: "@") {
            var user = rest[..<at]
            if user.hasSuffix(":") { user = user.dropLast() }
            guard !user.contains(":") else {
                throw TransportError(
                    .invalidConfiguration,
                    "a Redis password does not belong in the URL (it shows in the process list): give the user "
                        + "as redis://USER@HOST:PORT and the password in a file or the environment")
            }
            username = user.isEmpty ? nil : String(user)
            rest = rest[rest.index(after: at)...]
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
        self.username = username
        usesTLS = tls
        if let value = options["deadline-ms"] { deadline = .milliseconds(value) }
        if let value = options["clock-skew-ms"] { clockSkewAllowance = .milliseconds(value) }
    }
}

extension RedisAntiReplayStore {
    /// The TLS of this store's connections (nil for `redis://`): its trust and, when given, the relay's client
    /// certificate, read now (off the event loops).
    ///
    /// - Throws: `invalidConfiguration` when a file does not load, or only one of the certificate and the key is
    ///   given.
    package func redisTLS() throws(TransportError) -> RedisTLS? {
        guard usesTLS else { return nil }
        var identity: (chain: PEMData, key: PEMData)?
        switch (clientCertificateFile, clientKeyFile) {
        case (nil, nil): identity = nil
        case (let chain?, let key?): identity = (try PEMFile.read(chain), try PEMFile.read(key))
        default:
            throw TransportError(
                .invalidConfiguration,
                "a Redis client certificate needs both its chain and its key (--redis-cert and --redis-key)")
        }
        return try RedisTLS(trust: trust.anchors(), serverName: host, identity: identity)
    }
}
