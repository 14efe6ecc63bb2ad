import CommandLineSupport
import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// `ptt-transport serve`: the echo relay.
enum ServeCommand {
    static let usage = """
        usage: ptt-transport serve --listen HOST:PORT --cert PEM --key PEM [--tcp-listen HOST:PORT] [--no-udp]
                                   [--alpn A] [--ticket-key FILE [--previous-ticket-key FILE]] [--retry]
                                   [--events] [--hold-early] [--early-datagrams] [--idle-timeout SECONDS]
                                   [--max-connections N] [--retry-above N|off] [--no-source-limits]
                                   [--max-connections-per-source N]
                                   [--keylog-file FILE] [--qlog-dir DIR] [--event-loops N]
                                   [--zero-rtt-tickets N] [--peer-snapshot FILE] [--drain-seconds N] [--drain-notice S]
                                   [--workers N]
                                   [--anti-replay redis[s]://HOST:PORT[/DB] [--redis-ca PEM]
                                    [--redis-cert PEM --redis-key PEM]] [--prefer-quic-v2] [--relay-id NAME]
                                   [--quic-lb cr=N,server-id=HEX,nonce-len=M[,key=HEX32]]
                                   [--admin HOST:PORT [--admin-allow-remote]] [--config FILE] [--print-config]
                                   [--token-secret FILE] [--reset-secret FILE [--previous-reset-secret FILE]]
                                   [--talk-groups [--burst-buffer SECONDS] [--wake-exec CMD [--wake-timeout S]]
                                    [--relay-name NAME] [--users FILE] [--fleet redis[s]://HOST:PORT[/DB]
                                     [--trunk-listen HOST:PORT] [--fleet-secret FILE] [--trunk-ca PEM]
                                     [--trunk-name NAME]]]
          TCP (QMux over TLS 1.3, ALPN <alpn>-qx01) listens on --tcp-listen, by default on the QUIC port;
          --no-udp serves TCP only. --retry-above: validate new clients with Retry above N live connections
          (default 10000). --no-source-limits lifts the per-address budget (for labs where one host plays every
          client; never on a public relay). --max-connections-per-source: live connections one address (an IPv6
          /64) may hold in each of its two budgets, validated and not (default 1000). --keylog-file appends TLS
          secrets (NSS key log format, for Wireshark; a secret: debugging only). --qlog-dir writes one qlog per
          QUIC connection into an existing directory.
          --early-datagrams echoes datagrams that arrived in 0-RTT at once instead of after the handshake
          (safe against replay: see EarlyDataPolicy.deliverEarlyDatagrams).
          --zero-rtt-tickets: the 0-RTT ticket budget, tickets issued with 0-RTT per 6-hour window (default
          100000); tickets beyond it resume in 1-RTT (see EarlyDataPolicy.antiReplayCapacity).
          --anti-replay keeps the 0-RTT anti-replay memory in a Redis (or Valkey) the relays of a fleet share,
          with --ticket-key: a first flight replayed to any relay, or to a restarted one, is refused, and a
          restarted relay accepts 0-RTT for tickets issued before it started. Redis unreachable, slower than
          20 ms (?deadline-ms=N), answering an error or having lost its memory: 0-RTT refused (1-RTT) and counted;
          the loop never waits for Redis. --zero-rtt-tickets is then this relay's share of Redis: claims it makes
          per window. With --events, an "anti_replay" line reports the counters when they change.
          --reset-secret keeps the stateless-reset secret in FILE (created if missing) so a restarted relay's
          resets are recognized and its clients reconnect at once; the tokens are this relay's own, derived from
          FILE and --relay-id (default: the QUIC-LB server ID, else the host name and QUIC port), and it resets
          only connection IDs it issued. Keep --relay-id across restarts, unique in the fleet.
          --previous-reset-secret FILE (32 bytes, must exist): the reset secret being retired. Rotate by moving
          --reset-secret's file here, writing a new one, then SIGHUP (or restart): new connection IDs use the new
          secret, those issued before still get the reset their clients hold. Drop it after the idle timeout.
          --peer-snapshot FILE (needs --reset-secret)
          keeps the QUIC clients' addresses and connection IDs there, so a relay restarted after a crash resets
          each of them at once (a phone that only listens reconnects without waiting for its keep-alive).
          SIGTERM drains: no new connections, every client is asked to move to another relay of its name, and the
          relay exits 0 once they left or after --drain-seconds (default 10; a second signal exits at once).
          --drain-notice S (default 0, at most 60): behind a load balancer polling /readyz, the seconds between the
          SIGTERM (/readyz 503 at once) and the drain itself, during which the relay serves as before; give it at
          least twice the balancer's poll interval, so the phones it asks to move reach a relay the balancer
          already knows is ready, not this one again.
          --workers N runs the connections in N processes sharing the listening ports (the kernel steers each
          packet to its connection's process by connection ID); a worker that dies is started again, and only its
          clients reconnect (in 0-RTT with a shared --anti-replay store). SIGUSR2 to it upgrades in place: a new
          generation of workers from the executable on disk takes new connections, the old one drains (2 to 32
          workers; workers × event loops at most 128). --event-loops then counts per worker;
          --max-connections, --retry-above, the per-source budgets and --zero-rtt-tickets count for the relay.
          --event-loops: QUIC event loops (threads), default one per CPU; stderr says how packets reach them
          (bpf: the kernel steers by connection ID; forwarder: fallback).
          --prefer-quic-v2 moves clients that start in QUIC v1 and offer v2 to v2 (RFC 9368); by default each
          client stays in the version it starts in, so a client that starts in v1 every time keeps its 0-RTT.
          --quic-lb: connection IDs a QUIC-LB load balancer routes (draft-ietf-quic-load-balancers-21): config
          rotation 0-6, this relay's server ID (1-15 bytes), nonce length (4-18 bytes, 19 with the ID at most),
          and an optional 16-byte AES key (32 hex digits) to encrypt them; `,encode-len` puts the length in the
          first octet.
          --admin HOST:PORT serves /healthz (200 while alive), /readyz (200 once listening; 503 before, while
          draining and while an --anti-replay store never answered) and /metrics (OpenMetrics) over HTTP/1.1;
          loopback only unless --admin-allow-remote (it has no authentication). With --workers the supervisor
          serves it for the host: /readyz 200 while every worker is ready, /metrics the workers' summed.
          --anti-replay-password-file FILE: the Redis password (its first line), else the environment's
          PTT_REDIS_PASSWORD; the ACL user goes in the URL (redis://USER@HOST:PORT), a password never does.
          rediss://HOST:PORT speaks TLS to Redis' tls-port: its certificate is always verified against --redis-ca
          PEM (default: the system store) and must name HOST; a failure refuses 0-RTT (counted), is logged with
          what to fix, and the relay keeps retrying. --redis-cert PEM --redis-key PEM: the relay's certificate
          chain and key for a Redis that asks for one (tls-auth-clients yes: mutual TLS), signed by a CA in Redis'
          tls-ca-cert-file; read at start (a file that does not load stops the start with what to fix).
          --token-secret FILE keys the address-validation tokens (NEW_TOKEN, Retry) with FILE (32 bytes, created if
          missing): give every relay of a fleet the same file, and a phone's token from one is valid at all of them
          (with --retry it pays no Retry round trip at a relay it had not visited).
          SIGHUP reloads the certificate, the key, --ticket-key, --previous-ticket-key, --token-secret,
          --reset-secret and --previous-reset-secret from their files (and the trunks' fleet secret derived from them,
          or --fleet-secret): new handshakes use them, connections and trunks already open carry on (a file that does
          not load is logged as reload_failed and the relay keeps what it had).
          --config FILE reads these options from FILE, one a line: `option value` or a flag's name alone (no
          dashes; # comments); the command line wins. --print-config prints the options in effect in that format
          and exits.
        \(TalkGroupServe.usage)
        """

    static let valuedOptions =
        ([
            "listen", "cert", "key", "tcp-listen", "alpn", "ticket-key",
            "previous-ticket-key", "idle-timeout", "max-connections", "max-connections-per-source",
            "retry-above", "keylog-file", "qlog-dir", "reset-secret", "event-loops", "zero-rtt-tickets",
            "peer-snapshot", "drain-seconds", "drain-notice", "workers", "worker-sockets", "worker-of", "anti-replay",
            "quic-lb",
            "relay-id", "admin", "token-secret", "anti-replay-password-file", "previous-reset-secret",
            "admin-address-file",
        ] as Set<String>).union(RedisTLSOptions.options).union(TalkGroupServe.options)
    static let flagOptions: Set<String> = [
        "no-udp", "retry", "events", "hold-early", "debug", "no-source-limits", "early-datagrams",
        "prefer-quic-v2", "talk-groups", "admin-allow-remote",
    ]

    /// The command line, after the options of `--config FILE` (which it overrides). `--print-config` is a flag of
    /// the command line only: it prints the options in effect as a configuration file and exits.
    static func arguments(_ raw: [String]) throws -> Arguments {
        let commandLine = try Arguments(
            raw, options: valuedOptions.union(["config"]), flags: flagOptions.union(["print-config"]))
        guard let path = commandLine.value("config") else { return commandLine }
        let fromFile = try ConfigFile.arguments(
            path, options: valuedOptions, flags: flagOptions,
            refused: ["worker-sockets", "worker-of", "admin-address-file"])
        // The file first: a later value wins, so the command line's do.
        var merged = fromFile
        var index = 0
        while index < raw.count {  // drop --config FILE: the file is read once, here
            if raw[index] == "--config" {
                index += 2
                continue
            }
            if !raw[index].hasPrefix("--config=") { merged.append(raw[index]) }
            index += 1
        }
        return try Arguments(merged, options: valuedOptions, flags: flagOptions.union(["print-config"]))
    }

    static func run(_ raw: [String]) async throws {
        let args = try Self.arguments(raw)
        if args.flag("print-config") {
            print(ConfigFile.text(args, leaving: ["print-config"]), terminator: "")
            return
        }
        guard args.positionals.isEmpty else {
            throw Arguments.Failure(description: "unexpected \(args.positionals[0])")
        }
        let noUDP = args.flag("no-udp")
        let listen = noUDP ? args.value("listen") : try args.required("listen")
        guard let tcpListen = args.value("tcp-listen") ?? listen else {
            throw Arguments.Failure(description: "--no-udp needs --tcp-listen HOST:PORT (or --listen)")
        }
        var configuration = ServerConfiguration(
            quic: noUDP ? nil : listen, certificateChain: try args.required("cert"),
            privateKey: try args.required("key"))
        configuration.tcp = tcpListen
        if let alpn = args.value("alpn") { configuration.alpn = alpn }
        configuration.ticketKeyFile = args.value("ticket-key")
        configuration.previousTicketKeyFile = args.value("previous-ticket-key")
        configuration.statelessResetSecretFile = args.value("reset-secret")
        configuration.previousStatelessResetSecretFile = args.value("previous-reset-secret")
        configuration.tokenSecretFile = args.value("token-secret")
        configuration.peerSnapshotFile = args.value("peer-snapshot")
        if let identity = args.value("relay-id") {
            guard !identity.isEmpty else { throw Arguments.Failure(description: "--relay-id needs a name") }
            configuration.relayIdentity = identity
        }
        // An echo has no side effects: answer early messages at 0.5-RTT unless --hold-early.
        if args.flag("hold-early") && args.flag("early-datagrams") {
            throw Arguments.Failure(description: "--early-datagrams delivers early data at once; drop --hold-early")
        }
        configuration.earlyData = .enabled(
            deliverBeforeHandshake: !args.flag("hold-early"), deliverEarlyDatagrams: args.flag("early-datagrams"))
        if args.value("zero-rtt-tickets") != nil {
            let budget = try args.integer("zero-rtt-tickets", default: configuration.earlyData.antiReplayCapacity)
            guard budget >= 1 else { throw Arguments.Failure(description: "--zero-rtt-tickets must be at least 1") }
            configuration.earlyData.antiReplayCapacity = budget
        }
        if let url = args.value("anti-replay") {
            var store = try RedisAntiReplayStore(url: url)
            store.password = try RedisPassword.load(file: args.value("anti-replay-password-file"))
            RedisTLSOptions.apply(args, to: &store)
            configuration.antiReplay = .redis(store)
        }
        try RedisTLSOptions.check(args)
        configuration.requireRetry = args.flag("retry")
        configuration.prefersQUICVersion2 = args.flag("prefer-quic-v2")
        configuration.debugLogging = args.flag("debug")
        configuration.releasesFreedMemory = true  // this process is a relay: its heap may be trimmed
        if let idle = try args.number("idle-timeout") { configuration.idleTimeout = .milliseconds(Int64(idle * 1000)) }
        if args.value("max-connections") != nil {
            configuration.maxConnections = try args.integer("max-connections", default: configuration.maxConnections)
        }
        if let retryAbove = args.value("retry-above") {
            configuration.retryAboveConnections =
                retryAbove == "off"
                ? nil : try args.integer("retry-above", default: 10_000)
        }
        if args.value("max-connections-per-source") != nil {
            let limit = try args.integer("max-connections-per-source", default: 1000)
            guard limit >= 1, !args.flag("no-source-limits") else {
                throw Arguments.Failure(
                    description: "--max-connections-per-source must be at least 1, without --no-source-limits")
            }
            configuration.perSourceLimits?.maxConnections = limit
        }
        if args.flag("no-source-limits") { configuration.perSourceLimits = nil }
        configuration.keyLogFile = args.value("keylog-file")
        configuration.qlogDirectory = args.value("qlog-dir")
        if args.value("event-loops") != nil {
            configuration.eventLoops = try args.integer("event-loops", default: configuration.eventLoops)
            guard configuration.eventLoops >= 1 else {
                throw Arguments.Failure(description: "--event-loops must be at least 1")
            }
        }
        if let quicLB = args.value("quic-lb") {
            do {
                configuration.quicLB = try QUICLBConfiguration(parsing: quicLB)
            } catch {
                throw Arguments.Failure(description: "--quic-lb \(quicLB): \(error.message)")
            }
        }
        let talkGroups = args.flag("talk-groups") ? try TalkGroupServe.prepare(args, server: &configuration) : nil
        if !args.flag("talk-groups"), let stray = TalkGroupServe.options.first(where: { args.value($0) != nil }) {
            throw Arguments.Failure(description: "--\(stray) is an option of --talk-groups")
        }
        let drainSeconds = try args.number("drain-seconds") ?? 10
        let drainNotice = try args.number("drain-notice") ?? 0
        guard (0...60).contains(drainNotice) else {
            throw Arguments.Failure(
                description: "--drain-notice is 0 to 60 seconds (twice the balancer's poll interval)")
        }
        if args.flag("admin-allow-remote") && args.value("admin") == nil {
            throw Arguments.Failure(description: "--admin-allow-remote goes with --admin HOST:PORT")
        }
        // The supervisor of --workers serves the host's admin endpoint from its workers' (`SupervisorAdmin`).
        let supervising = args.value("workers") != nil && args.value("worker-sockets") == nil
        // Before the listeners: a balancer polling /readyz sees 503 until they are up.
        let admin = try args.value("admin").flatMap {
            supervising ? nil : try AdminEndpoint.start($0, allowRemote: args.flag("admin-allow-remote"))
        }
        defer { admin?.stop() }
        if let share = args.value("worker-sockets") {  // a worker of `--workers`: run on the parent's sockets
            guard let inherited = InheritedSockets(argument: share), let parent = Int32(args.value("worker-of") ?? "")
            else { throw Arguments.Failure(description: "--worker-sockets is for the workers `--workers` starts") }
            guard WorkerProcesses.dieWithParent(parent) else { return }  // the parent is gone already
            ServeWorkers.exitWhenOrphaned(parent: parent)
            configuration.inheritedSockets = inherited
            configuration.eventLoops = max(1, inherited.udp.count)
        } else if args.value("workers") != nil {
            let workers = try args.integer("workers", default: 1)
            let supervisorAdmin = try args.value("admin").map {
                try SupervisorAdmin.start(
                    $0, allowRemote: args.flag("admin-allow-remote"),
                    slots: WorkerSlots(workers: workers, loopsPerWorker: configuration.eventLoops))
            }
            try await ServeWorkers.supervise(
                workers: workers, loopsPerWorker: configuration.eventLoops, configuration: configuration,
                arguments: raw, admin: supervisorAdmin)
        }
        let server = try await TransportServer.bind(configuration: configuration)
        GracefulStop.set {
            RelayLog.info("drain", ["deadline_seconds": drainSeconds, "notice_seconds": drainNotice])
            // /readyz and ptt_relay_ready say 503 / 0 from now on; the relay serves on through the notice, so a
            // balancer polling it stops sending new flows here before any phone is asked to move.
            server.draining.withLock { $0 = true }
            if drainNotice > 0 { try? await Task.sleep(for: .milliseconds(Int64(drainNotice * 1000))) }
            await server.drain(deadline: .milliseconds(Int64(drainSeconds * 1000)))  // then `stop` is logged
        }
        // SIGHUP (set once, before `listening on`): the certificate and secrets, and the trunks' fleet secret once
        // a talk-group relay with trunks runs.
        let trunked = Locked<TalkGroupRelay?>(nil)
        SignalAction.hangupReload.set { [configuration, args] in
            await reload(server, configuration)
            if let relay = trunked.withLock({ $0 }) { TalkGroupTrunkOptions.reloadSecret(args, into: relay) }
        }
        RelayLog.markServing()
        RelayLog.info(
            "start", ["pid": Int(getpid()), "ngtcp2": LinkedLibraries.ngtcp2, "gnutls": LinkedLibraries.gnutls])
        for line in [server.zeroRTTRefusal, LinkedLibraries.gnutlsWarning].compactMap({ $0 }) {
            RelayLog.warning("library", ["message": line])
        }
        if let resets = server.restartResets.withLock({ $0 }) {
            RelayLog.info(
                "peer_snapshot",
                ["resets_sent": resets.sent, "addresses": resets.addresses, "withheld": resets.withheld])
        }
        let storeWatch = await StoreStateLog.start(server)
        print("listening on \((server.quicAddress ?? server.tcpAddress).map { "\($0)" } ?? "")")
        if let quic = server.quicAddress, let tcp = server.tcpAddress, quic != tcp { print("listening on tcp \(tcp)") }
        if let admin {
            admin.serving(server)
            print("admin on \(admin.address)")
            if let file = args.value("admin-address-file") { try AdminEndpoint.announce(admin.address, in: file) }
        }
        var listening: [String: Any] = [
            "event_loops": server.loops.count, "steering": server.steering.rawValue,
        ]
        listening["quic"] = server.quicAddress?.description
        listening["tcp"] = server.tcpAddress?.description
        listening["admin"] = admin?.address
        RelayLog.info("listen", listening)
        fflush(nil)
        // An upgrade's new worker: the supervisor moves new connections here now.
        if let ready = configuration.inheritedSockets?.ready { WorkerReadiness.announce(on: ready) }
        defer {
            storeWatch?.cancel()
            RelayLog.info("stop", [:])
        }
        let events: (@Sendable (RelayEvent) -> Void)? = args.flag("events") ? { @Sendable event in emit(event) } : nil
        let reporter = args.flag("events") ? Task { await reportAntiReplay(server) } : nil
        if let relay = talkGroups.map({ $0(server) }) {
            if relay.configuration.trunk != nil { trunked.withLock { $0 = relay } }
            admin?.serving(talkGroups: relay)
            await relay.run()
        } else {
            await EchoRelay.run(server, events: events)
        }
        reporter?.cancel()
    }

    /// SIGHUP: the certificate, key, ticket keys, token and reset secrets read again from their files.
    private static func reload(_ server: TransportServer, _ configuration: ServerConfiguration) async {
        do {
            try await server.reload(configuration: configuration)
            RelayLog.info("reload", ["certificate": configuration.certificateChain])
        } catch {
            RelayLog.error("reload_failed", ["message": "\(error)"])
        }
    }

    /// With --events: one "anti_replay" line whenever the anti-replay counters changed (checked every 100 ms).
    private static func reportAntiReplay(_ server: TransportServer) async {
        var last = AntiReplayStatistics()
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(100))
            let now = await server.antiReplayStatistics()
            guard now != last else { continue }
            last = now
            JSONOutput.print([
                "event": "anti_replay", "accepted": Int(now.accepted), "replays_refused": Int(now.replaysRefused),
                "refused_store_unavailable": Int(now.refusedStoreUnavailable),
                "refused_over_budget": Int(now.refusedOverBudget),
                "refused_unknown_or_expired": Int(now.refusedUnknownOrExpired),
                "refused_store_memory_lost": Int(now.refusedStoreMemoryLost),
                "refused_not_held": Int(now.refusedNotHeld),
            ])
        }
    }

    private static func emit(_ event: RelayEvent) {
        switch event {
        case .handshakeCompleted(let remote, let path):
            JSONOutput.print(["event": "handshake_completed", "remote": remote, "path": path.rawValue])
        case .message(let remote, let stream, let bytes, let isEarly):
            JSONOutput.print([
                "event": "message", "remote": remote, "stream": stream, "bytes": bytes,
                "is_early": isEarly,
            ])
        case .datagram(let remote, let bytes, let isEarly):
            JSONOutput.print(["event": "datagram", "remote": remote, "bytes": bytes, "is_early": isEarly])
        case .pathChanged(let from, let to):
            JSONOutput.print(["event": "path_changed", "from": from, "to": to])
        case .closed(let remote, let reason):
            JSONOutput.print(["event": "closed", "remote": remote, "reason": reason.description])
        case .streamRefused(let remote, let stream, let error):
            JSONOutput.print([
                "event": "stream_refused", "remote": remote, "stream": stream, "reason": error.description,
            ])
        }
    }
}
