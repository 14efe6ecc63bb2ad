import Glibc
import TransportCore
import TransportIO

/// How a relay listens: addresses, certificate, protocol and limits.
@dynamicMemberLookup
public struct ServerConfiguration: Sendable {
    /// The settings a client and a relay share, stored once: read and written as this configuration's own
    /// (`configuration.idleTimeout`), documented on ``ConnectionSettings``.
    public var connection = ConnectionSettings()

    /// Reads and writes a setting of ``connection`` as this configuration's own.
    public subscript<Value>(dynamicMember setting: WritableKeyPath<ConnectionSettings, Value>) -> Value {
        get { connection[keyPath: setting] }
        set { connection[keyPath: setting] = newValue }
    }

    /// The UDP address for QUIC (`0.0.0.0:4433`, `[::]:4433`, `127.0.0.1:0` for a free port); nil: no QUIC.
    public var quic: String?
    /// The TCP address for QMux over TLS 1.3 (the fallback for clients whose UDP is blocked); nil: no TCP.
    /// Conventionally the same port as QUIC (the same address with port 0 binds TCP to the port QUIC got). The TCP
    /// ALPN is derived from `alpn`: `<alpn>-qx01`.
    public var tcp: String? = nil
    /// The PEM certificate chain file.
    public var certificateChain: String
    /// The PEM private key file.
    public var privateKey: String
    /// A 64-byte session-ticket key file shared by a fleet (nil: a random key for this process).
    public var ticketKeyFile: String?
    /// The ticket key being retired, during a rotation: tickets it sealed still resume (and may carry 0-RTT)
    /// while this is set. Rotate by moving the old file here and creating a new `ticketKeyFile`; remove it once
    /// clients had time to refresh their state (a client resuming with an older ticket gets a full handshake).
    public var previousTicketKeyFile: String? = nil
    /// 0-RTT acceptance and when the application sees early data.
    public var earlyData: EarlyDataPolicy
    /// Where the 0-RTT anti-replay memory lives: in this process (the default) or in a Redis shared by a fleet
    /// (with ``ticketKeyFile`` shared too). Ignored when ``earlyData`` is disabled.
    public var antiReplay: AntiReplayBackend = .inProcess
    /// A 32-byte file keying address-validation tokens (NEW_TOKEN, Retry) for a fleet (nil: random per process).
    public var tokenSecretFile: String?
    /// A 32-byte file deriving stateless-reset tokens, so a restarted relay resets stale clients at once.
    public var statelessResetSecretFile: String?
    /// The stateless-reset secret being retired, during a rotation (32 bytes, an existing file; needs
    /// ``statelessResetSecretFile``): the connection IDs issued under it are still answered with the reset their
    /// clients hold, while new IDs and their tokens come from ``statelessResetSecretFile``. Rotate by moving the old
    /// file here and creating a new ``statelessResetSecretFile``, then reload or restart; remove it once every
    /// connection from before the rotation has ended (the relay's idle timeout after the last of them).
    public var previousStatelessResetSecretFile: String? = nil
    /// What tells this relay apart from the others of its fleet, for its stateless resets: its reset tokens and the
    /// tag its connection IDs carry are derived from `statelessResetSecretFile` (the fleet's) and this, so a relay
    /// answers with a stateless reset only connection IDs it issued itself, and never holds the reset a client of
    /// another relay needs (RFC 9000 §21.11: an attacker who learned a phone's connection ID could otherwise end its
    /// call by sending it to any relay of the fleet). Keep it the same across restarts — a relay restarted under
    /// another identity cannot reset its previous run's clients — and different on every relay sharing the file.
    /// nil (the default): with `quicLB`, its config rotation and server ID (unique in the fleet); without, the
    /// host's name and the QUIC port. Set it where the host name changes on every start (a container) or two
    /// relays share a host name and port (behind NAT).
    public var relayIdentity: String? = nil
    /// A file where the relay keeps its QUIC clients' proven addresses and connection IDs (rewritten at most once a
    /// second when they changed; about 200 bytes a client), so that after a crash or a kill the restarted relay
    /// sends each of them a stateless reset at once and they reconnect — a phone that only listens would otherwise
    /// stay deaf, showing a ready connection, until its next keep-alive. Needs `statelessResetSecretFile` (the
    /// resets must carry the tokens the crashed relay gave out). Only addresses a client proved are kept (the
    /// handshake's, a new path once validated), a restart sends an address at most three times the bytes it had
    /// received from there, and the file is emptied before the resets leave, so a relay that crashes again sends
    /// nothing more for the same connections. A graceful shutdown removes the file; a file that is not a snapshot
    /// is reported and ignored. Clients that connected in the last second before a crash are not in it and learn
    /// of the restart when they next send. Each worker of `ptt-transport serve --workers N` keeps its own file,
    /// this path with `.worker-` and its index (0 to N − 1) appended, so a restarted worker resets only its own
    /// clients.
    public var peerSnapshotFile: String? = nil
    /// A worker of `ptt-transport serve --workers N`: run on these inherited sockets instead of binding (the loop
    /// count is their number).
    package var inheritedSockets: InheritedSockets? = nil
    /// Force address validation with Retry on every new connection.
    public var requireRetry: Bool
    /// Once this many connections are live (QUIC and TCP), new QUIC clients without a valid token are validated
    /// with Retry (one more round trip for them, none for returning clients with a NEW_TOKEN), and a Retry
    /// allocates nothing: a flood of Initials from spoofed addresses then stops at this many half-open connections,
    /// and the rest of the table stays free for clients that prove their address. Default 10,000 (half the default `maxConnections`; keep it
    /// below `maxConnections`). nil: only with `requireRetry`.
    public var retryAboveConnections: Int? = 10_000
    /// Live connections the server holds, QUIC and TCP together (TCP ones from accept, their handshake included):
    /// one budget for the relay's memory, whichever path clients take. Connections beyond it are refused with
    /// CONNECTION_REFUSED (a `TransportClient` reports `TransportError.Code.connectionRefused`; over TCP: reset at
    /// accept); established connections are not affected. Default 20,000.
    public var maxConnections: Int
    /// TCP connections still in their handshake (TLS and QMux parameters not both done) that the relay holds at
    /// once; each costs a descriptor and a TLS session. When a new connection arrives with this many pending, the
    /// oldest handshake of the source holding the most pending is closed to make room (the longest-pending one
    /// when every source holds one): a flood of connections that never finish (Slowloris) cannot lock TCP out by
    /// filling the table, and a slow real client with its one handshake is not what makes room unless the flood
    /// comes from at least as many sources as this cap.
    /// Default 1024 (a few MB of TLS state at most). Must be at least 1.
    public var maxPendingTCPHandshakes: Int = 1024
    /// Pending TCP handshakes one source may hold: an IPv4 address, or an IPv6 /64 (one host usually has the
    /// whole prefix). A connection from a source at its budget is closed at accept (reset, before any TLS work).
    /// Default 64: dozens of clients behind one NAT can reconnect at once, while one host cannot take more than a
    /// sixteenth of `maxPendingTCPHandshakes`. Must be at least 1.
    public var maxPendingTCPHandshakesPerSource: Int = 64
    /// Bidirectional streams each client may have open at once (each one closed lets it open another). Default 4:
    /// a push-to-talk client needs one or two, and each stream a stranger fills out of order pins about 18 KiB of
    /// the relay's memory (see `pinnableBytesPerConnection`).
    public var maxStreamsPerConnection: Int
    /// Returns freed heap memory to the system about a second after connections close (`malloc_trim` on a utility
    /// thread), so a relay's resident size falls back after a burst of connections (an attack's, say). It trims
    /// the whole process's heap, so it is for a process that is a relay (`ptt-transport serve` turns it on), not an
    /// app that embeds one: Foundation's `Process.run` has crashed in a process whose heap was trimmed meanwhile.
    /// Each QUIC loop of such a relay also makes room in its thread's heap at start (56 MiB made writable, then
    /// freed: resident memory does not move), so a wake storm's connections grow into it without a system call
    /// per few pages.
    public var releasesFreedMemory = false
    /// How many connections one client address may hold and open (see `PerSourceLimits` for the defaults and
    /// why they suit NATed offices). nil: no per-source limit (a lab where one host plays every client).
    public var perSourceLimits: PerSourceLimits? = PerSourceLimits()
    /// How many event loops (threads) serve the relay. Each has its own UDP socket on the `quic` address (an
    /// SO_REUSEPORT group) and its own share of the connections: the kernel steers every QUIC packet of a
    /// connection to the loop that accepted it, by a loop index in the connection IDs the server issues. The TCP
    /// listener accepts on the first loop and deals the connections out to the loops in turn. Default: the CPUs
    /// this process may run on (`sched_getaffinity`), so a relay uses every core. 1 runs everything on one loop;
    /// values are clamped to 1...64. `connectionCount()`, the connection and pending-handshake limits, the
    /// per-source limits and 0-RTT anti-replay protection stay server-wide whatever the count.
    public var eventLoops: Int = ServerConfiguration.availableCPUs
    /// QUIC-LB connection IDs (draft-ietf-quic-load-balancers-21) for a fleet behind a stateless layer-4 load
    /// balancer: every connection ID the relay issues (the source ID of its handshake packets, NEW_CONNECTION_ID,
    /// Retry) carries this relay's server ID, in the clear or encrypted with the configuration's key, so the
    /// balancer, given the same configuration, routes each packet to this relay by its destination connection ID,
    /// also after a client's NAT rebinding or migration changed the 4-tuple it would otherwise hash. nil (the
    /// default): 18-byte random IDs. With several `eventLoops`, the loop index rides in the nonce: a plaintext
    /// configuration keeps the kernel's steering program; with a key the loops decrypt each packet's ID to find
    /// its loop (the kernel hashes, a loop hands another's packets over), which costs a few AES blocks a packet.
    public var quicLB: QUICLBConfiguration? = nil
    /// Move QUIC clients that start in v1 and offer v2 to v2 (compatible version negotiation, RFC 9368). Off by
    /// default: the relay keeps every client in the version it started in. Where the linked ngtcp2 speaks v2 (1.x),
    /// a client upgraded this way gets tickets bound to v2 (RFC 9369 §7), which carry 0-RTT only in a connection
    /// that starts in v2; a client that starts its next connection in v1 again (aioquic 1.7.2 does, whatever
    /// version its ticket came from) is then resumed without 0-RTT, or not at all, and loses the fast wake. Turn it
    /// on when every client remembers the version of its ticket, as ``TransportClient`` does
    /// (``ResumptionState/quicVersion``); a client that starts in v2 is served in v2 either way. No effect on
    /// ngtcp2 0.12.1, which speaks v1 only. `ptt-transport serve --prefer-quic-v2`.
    public var prefersQUICVersion2 = false
    /// Further application protocols (ALPN) the QUIC listener accepts beside `alpn`, e.g. a relay's trunks
    /// (`ptt-trunk/1`) on its phones' port. A connection whose client chose one of them arrives on
    /// ``TransportServer/additionalConnections``, never on ``TransportServer/connections``; it has this
    /// configuration's limits and timeouts. QUIC only: the TCP (QMux) listener accepts `alpn` alone. Each must be
    /// 1 to 255 bytes and differ from `alpn`, or `bind` throws `invalidConfiguration`. Default: none.
    public var additionalALPNs: [String] = []
    /// Steer packets with the kernel program when it loads (false: kernel hashing and forwarding between loops,
    /// for tests of that fallback).
    package var steeringProgram = true
    /// dpkg's status file, where `bind` reads the installed GnuTLS revision (tests point it at old revisions).
    package var dpkgStatusFile = DpkgStatus.defaultFile

    /// The number of CPUs this process may run on (its affinity mask), at least 1.
    public static var availableCPUs: Int { ProcessorAffinity.cpuCount }

    /// A configuration listening for QUIC on `quic` and, when `tcp` is set, for the TCP fallback (QMux over TLS)
    /// on `tcp`, with the given certificate chain and key files; the other limits take the defaults documented on
    /// each property.
    public init(
        quic: String? = "0.0.0.0:4433", tcp: String? = nil, certificateChain: String, privateKey: String,
        alpn: String = "ptt/1", ticketKeyFile: String? = nil,
        earlyData: EarlyDataPolicy = .enabled(), tokenSecretFile: String? = nil,
        statelessResetSecretFile: String? = nil, requireRetry: Bool = false,
        maxConnections: Int = 20_000, maxStreamsPerConnection: Int = 4,
        idleTimeout: Duration = .seconds(30), handshakeTimeout: Duration = .seconds(10),
        maximumMessageSize: Int = 64 * 1024, datagramReceiveBuffer: Int = 256,
        datagramSendBuffer: Int = 256, debugLogging: Bool = false
    ) {
        self.quic = quic
        self.tcp = tcp
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.connection.alpn = alpn
        self.ticketKeyFile = ticketKeyFile
        self.earlyData = earlyData
        self.tokenSecretFile = tokenSecretFile
        self.statelessResetSecretFile = statelessResetSecretFile
        self.requireRetry = requireRetry
        self.maxConnections = maxConnections
        self.maxStreamsPerConnection = maxStreamsPerConnection
        self.connection.idleTimeout = idleTimeout
        self.connection.handshakeTimeout = handshakeTimeout
        self.connection.maximumMessageSize = maximumMessageSize
        self.connection.datagramReceiveBuffer = datagramReceiveBuffer
        self.connection.datagramSendBuffer = datagramSendBuffer
        self.debugLogging = debugLogging
    }

    /// The most stream-reassembly memory one QUIC connection can make the relay hold, in bytes: its receive window,
    /// derived from `maximumMessageSize` (a stream's window and the connection's each hold one largest message),
    /// plus about 18 KiB for each of `maxStreamsPerConnection` streams held out of order. 144 KiB with the
    /// defaults; the connection's own state (about 100 KiB: TLS, ngtcp2, buffers) comes on top.
    public var pinnableBytesPerConnection: Int { Int(receiveBudget.pinnableBytes) }

    var receiveBudget: ReceiveBudget {
        ReceiveBudget(maximumMessageSize: connection.maximumMessageSize, streams: max(1, maxStreamsPerConnection))
    }

    /// The QUIC endpoint's parameters: `quicParameters` with the receive windows of `receiveBudget`.
    var quicEndpointParameters: QUICParameters {
        var parameters = quicParameters
        parameters.apply(receiveBudget)
        return parameters
    }

    var quicParameters: QUICParameters {
        var parameters = QUICParameters(connection)
        parameters.maxBidirectionalStreams = UInt64(max(1, maxStreamsPerConnection))
        parameters.negotiatesVersion = prefersQUICVersion2
        parameters.additionalALPNs = additionalALPNs
        return parameters
    }
}

extension ServerConfiguration {
    /// Creates the configured secret files that do not exist yet, before several processes load them (the workers
    /// of `ptt-transport serve --workers`: each creating a missing file itself would give each its own key).
    package func createSecretFiles() throws(TransportError) { _ = try loadSecrets() }

    /// `relayIdentity`, or its default for a relay listening for QUIC on `quicPort` (see `relayIdentity`).
    func resolvedRelayIdentity(quicPort: UInt16) -> String {
        if let relayIdentity { return relayIdentity }
        if let quicLB { return "quic-lb cr=\(quicLB.configRotation) server-id=\(Hex.string(quicLB.serverID))" }
        var name = [CChar](repeating: 0, count: 256)
        let host =
            gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        return "\(host) \(quicPort)"
    }

    /// The peer snapshot file this process keeps: `peerSnapshotFile`, or a worker's own beside it.
    var peerSnapshotPath: String? {
        guard let peerSnapshotFile else { return nil }
        return inheritedSockets.map { "\(peerSnapshotFile).worker-\($0.workerIndex)" } ?? peerSnapshotFile
    }

    /// The server's secrets: loaded from (or created in) the configured files, random otherwise.
    func loadSecrets() throws(TransportError)
        -> (ticketKey: [UInt8]?, previousTicketKey: [UInt8]?, secrets: ServerSecrets)
    {
        if peerSnapshotFile != nil && statelessResetSecretFile == nil {
            throw TransportError(
                .invalidConfiguration,
                "peerSnapshotFile needs statelessResetSecretFile: a restarted relay's resets must carry the tokens "
                    + "the previous run gave out")
        }
        if previousStatelessResetSecretFile != nil && statelessResetSecretFile == nil {
            throw TransportError(
                .invalidConfiguration,
                "previousStatelessResetSecretFile needs statelessResetSecretFile: a rotation moves the old secret "
                    + "to the previous file and puts a new one in statelessResetSecretFile")
        }
        let random = ServerSecrets.random()
        let ticketKey = try ticketKeyFile.map { path throws(TransportError) in
            try SecretFile.loadOrCreate(path: path, length: 64)
        }
        let previousTicketKey = try previousTicketKeyFile.map { path throws(TransportError) in
            try SecretFile.load(path: path, length: 64)
        }
        let tokenSecret =
            try tokenSecretFile.map { path throws(TransportError) in
                try SecretFile.loadOrCreate(path: path, length: 32)
            } ?? random.tokenSecret
        let resetSecret =
            try statelessResetSecretFile.map { path throws(TransportError) in
                try SecretFile.loadOrCreate(path: path, length: 32)
            } ?? random.statelessResetSecret
        let previousResetSecret = try previousStatelessResetSecretFile.map { path throws(TransportError) in
            try SecretFile.load(path: path, length: 32)
        }
        return (
            ticketKey, previousTicketKey,
            ServerSecrets(
                tokenSecret: tokenSecret, statelessResetSecret: resetSecret,
                previousStatelessResetSecret: previousResetSecret)
        )
    }
}

extension ServerConfiguration {
    /// This configuration with `policy` instead of its early-data policy.
    func withEarlyData(_ policy: EarlyDataPolicy) -> ServerConfiguration {
        var configuration = self
        configuration.earlyData = policy
        return configuration
    }

    /// The GnuTLS checks for this configuration's dpkg status file (`GnuTLSSafety`).
    var gnutlsSafety: GnuTLSSafety.Assessment {
        dpkgStatusFile == DpkgStatus.defaultFile
            ? GnuTLSSafety.current
            : GnuTLSSafety.assess(linkedVersion: LinkedLibraries.gnutls, statusFile: dpkgStatusFile)
    }
}
