import CommandLineSupport
import Foundation
import PTTTalkGroups
import PTTTransport

/// `ptt-transport serve --talk-groups`: the talk-group relay (`TalkGroupRelay`) instead of the echo relay.
enum TalkGroupServe {
    static let usage = """
          --talk-groups runs the talk-group relay instead of the echo relay: phones join groups by user (see
          connect --user), hold the floor, hear each burst from its first frame, and suspended members are woken.
          --burst-buffer SECONDS keeps each group's current burst that long for late joiners (default 30, 1 to
          300; memory: at most 13 KiB per second per group). --wake-exec CMD runs `/bin/sh -c CMD` once per burst
          with one JSON object on stdin ({group, burst, talker, relay, members: [{user, push_token, platform[,
          last_relay]}], ticket}), killed after --wake-timeout SECONDS (default 5); at most 4 run at once and 64
          wait, later bursts are dropped and counted; with --fleet only a group's home runs it, once per burst, for
          the group's members not connected on any relay (give every relay the same command; a store that
          answers after 200 ms adds a second run for the burst, "late": true, with the members not named yet).
          --relay-name NAME is the name (and certificate name) phones connect to,
          put in wake tickets (default localhost). --users FILE admits only the users listed, one "USER TOKEN"
          per line (connect --token), "USER TOKEN receive-only" for a user admitted only as a listener (connect
          --receive-only); without it every user is admitted (a lab: never on a public relay).
          --fleet redis[s]://HOST:PORT[/DB] (may be the --anti-replay store; rediss:// verified as --anti-replay's,
          with --redis-ca; no AUTH yet) makes this relay one of a fleet whose groups span relays: it heartbeats its
          liveness there (every 150 ms, live 600 ms), writes its members, and grants a group's floor only as the
          group's home (rendezvous hashing over the live relays, named by --relay-id, default the --listen address);
          --events prints "fleet" (the live relays), "home" (a group's role here changed) and "trunk" lines (up, down,
          refused, dial-failed, with peer and reason). With --workers N each worker is a relay of the fleet named
          ID#INDEX.PID (ID: --relay-id or its default; a restarted worker is a new relay) and needs --trunk-listen
          HOST:PORT, worker i accepting trunks on PORT+i. The relays connect by trunks (ALPN ptt-trunk/1): a member's
          floor requests are decided by its group's home, and each talker's audio reaches the group's members on every
          relay (one datagram per group per peer relay). Each relay dials the live relays whose --relay-id sorts after
          its own. By default trunks arrive on the --listen port beside the phones and --listen is the address
          published (a wildcard address is refused: give --trunk-listen); --trunk-listen HOST:PORT gives them a
          listener of their own instead (its --relay-id default is then --relay-name:PORT). A dialing relay proves the
          fleet secret (an HMAC over a fresh challenge and both names): --fleet-secret FILE (32 bytes), else one
          derived from the --ticket-key file, else from the --reset-secret file (the same file on every relay;
          replacing it on every relay replaces the trunk secret, and trunks prove the new one when they next connect;
          with --previous-ticket-key, or --previous-reset-secret, a relay proves and admits the old file's secret too,
          keeping its trunks to relays not rotated yet). The dialer verifies the other relay's certificate for
          --trunk-name (default --relay-name, else the first DNS name of --cert) against --trunk-ca (default: the
          relay's own --cert file on the --listen port, as the fleet's relays share the certificate of the name phones
          dial; the system's CAs with --trunk-listen).
        """

    static let options: Set<String> = [
        "burst-buffer", "wake-exec", "wake-timeout", "relay-name", "users", "fleet", "trunk-listen", "fleet-secret",
        "trunk-ca", "trunk-name",
    ]

    /// Checks the talk-group options before anything binds (making `server` accept trunks on its QUIC port when
    /// the fleet's trunks share it); returns how to make the relay once the server is up.
    static func prepare(
        _ args: Arguments, server: inout ServerConfiguration
    ) throws -> (TransportServer) -> TalkGroupRelay {
        let seconds = try args.number("burst-buffer") ?? 30
        guard (1...300).contains(seconds) else {
            throw Arguments.Failure(description: "--burst-buffer takes 1 to 300 seconds")
        }
        let timeout = try args.number("wake-timeout") ?? 5
        guard timeout > 0, timeout <= 600 else {
            throw Arguments.Failure(description: "--wake-timeout takes more than 0, at most 600 seconds")
        }
        if let command = args.value("wake-exec"), command.trimmingCharacters(in: .whitespaces).isEmpty {
            throw Arguments.Failure(description: "--wake-exec needs a command")
        }
        let users = try args.value("users").map(readUsers)
        let name = args.value("relay-name") ?? "localhost"
        guard !name.isEmpty, name.utf8.count <= 253 else {
            throw Arguments.Failure(description: "--relay-name takes a host name of 1 to 253 characters")
        }
        let sender = args.value("wake-exec").map {
            ExecWakeSender(command: $0, timeout: .milliseconds(Int64(timeout * 1000)))
        }
        let emit = args.flag("events")
        let fleetName = args.value("relay-id")
        let fleet = try fleetStore(args, relayName: fleetName)
        let place = try fleet == nil ? nil : FleetWorkers.place(args)
        var trunk = try fleet == nil ? TalkGroupTrunkOptions.refuseStray(args) : TalkGroupTrunkOptions.trunk(args)
        if let index = place?.index, let listen = trunk?.listen {
            trunk?.listen = FleetWorkers.trunkListen(listen, worker: index)
        }
        if trunk?.sharesRelayListener == true { TrunkConfiguration.acceptTrunks(on: &server) }
        let quicLB = server.quicLB
        return { server in
            relay(
                server, name: name, quicLB: quicLB, seconds: seconds, timeout: timeout, users: users, sender: sender,
                emit: emit, fleet: fleet.map { ($0, fleetName) }, worker: place?.index, trunk: trunk)
        }
    }

    /// The store of `--fleet`, checked with the relay's name (nil without --fleet).
    private static func fleetStore(_ args: Arguments, relayName: String?) throws -> RedisAntiReplayStore? {
        guard let url = args.value("fleet") else { return nil }
        var store: RedisAntiReplayStore
        do {
            store = try RedisAntiReplayStore(url: url)
        } catch {
            throw Arguments.Failure(description: "--fleet \(url): \((error as? TransportError)?.message ?? "\(error)")")
        }
        guard store.username == nil else {  // the fleet's presence connects without AUTH (not built yet)
            throw Arguments.Failure(
                description: "--fleet \(url): Redis authentication is not supported for the fleet's store yet")
        }
        RedisTLSOptions.apply(args, to: &store)  // as --anti-replay's
        guard let relayName else { return store }
        do {
            // With --workers each worker's name gets "#INDEX.PID": checked with the longest.
            let longest = args.value("workers") == nil ? relayName : FleetWorkers.longestRelayName(relayName)
            try FleetConfiguration(store: store, relayName: longest, trunkAddress: "").validate()
        } catch {
            throw Arguments.Failure(description: "--relay-id with --fleet: \(error.message)")
        }
        return store
    }

    private static func relay(
        _ server: TransportServer, name: String, quicLB: QUICLBConfiguration?, seconds: Double, timeout: Double,
        users: [String: UserEntry]?, sender: ExecWakeSender?, emit: Bool, fleet: (RedisAntiReplayStore, String?)?,
        worker: Int?, trunk: TrunkConfiguration?
    ) -> TalkGroupRelay {
        let port = (server.quicAddress ?? server.tcpAddress)?.port ?? 0
        var configuration = TalkGroupRelay.Configuration(
            identity: RelayIdentity(serverName: name, port: port, quicLBServerID: quicLB?.serverID))
        configuration.burstBuffer.maximumDuration = .milliseconds(Int64(seconds * 1000))
        configuration.burstBuffer.maximumBytes = max(64 * 1024, Int(Double(384 * 1024) * seconds / 30))
        // The command is killed at its own timeout; the hook's runs a little later, so it counts the kill.
        configuration.wakeHook.timeout = .milliseconds(Int64(timeout * 1000) + 500)
        if let (store, relayName) = fleet {
            // Trunks on the relay's port: named by the address the others dial (unique in the fleet), published
            // once bound. A listener of their own: named NAME:PORT, publishing --trunk-listen.
            let shared = trunk.flatMap { trunk in
                server.quicAddress.flatMap { try? trunk.sharesRelayListener ? trunk.publishedAddress(bound: $0) : nil }
            }
            // A worker of --workers is a relay of its own: NAME#INDEX.PID.
            let named = relayName ?? shared?.description ?? "\(name):\(port)"
            configuration.fleet = FleetConfiguration(
                store: store,
                relayName: worker.map { FleetWorkers.relayName(named, worker: $0, pid: getpid()) } ?? named,
                trunkAddress: shared?.description ?? trunk?.listen ?? "")
            configuration.trunk = trunk
        }
        let events: (@Sendable (TalkGroupEvent) -> Void)? = emit ? { @Sendable event in line(event) } : nil
        return TalkGroupRelay(
            server: server, configuration: configuration,
            immediateAuthenticator: { request in  // a table lookup: answered on the loop for 0-RTT joins
                guard let users else { return true }
                guard let entry = users[request.user.user] else { return false }
                // The role is checked with the identity: a listener's token does not let it talk.
                return Array(entry.token.utf8) == request.credential
                    && (!entry.receiveOnly || request.role == .receiveOnly)
            },
            wakeSender: sender, events: events)
    }

    /// A user of `--users`: its token, and whether it may only listen.
    struct UserEntry: Sendable {
        let token: String
        let receiveOnly: Bool
    }

    /// "USER TOKEN [receive-only]" lines (blank lines and lines starting with # skipped).
    private static func readUsers(_ path: String) throws -> [String: UserEntry] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Arguments.Failure(description: "--users \(path): cannot read the file")
        }
        var users: [String: UserEntry] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.isEmpty || words[0].hasPrefix("#") { continue }
            guard words.count == 2 || (words.count == 3 && words[2] == "receive-only") else {
                throw Arguments.Failure(
                    description: "--users \(path):\(number + 1): expected USER TOKEN, or USER TOKEN receive-only")
            }
            users[String(words[0])] = UserEntry(token: String(words[1]), receiveOnly: words.count == 3)
        }
        return users
    }

    /// One JSON line per event.
    private static func line(_ event: TalkGroupEvent) {
        switch event {
        case .joined(let user, let group, let early, let replaced):
            JSONOutput.print([
                "event": "joined", "user": user.user, "group": group, "is_early": early, "replaced": replaced,
            ])
        case .left(let user, let group, let expired):
            JSONOutput.print(["event": "left", "user": user.user, "group": group, "expired": expired])
        case .presence(let user, let group, let presence):
            JSONOutput.print(["event": "presence", "user": user.user, "group": group, "presence": presence.rawValue])
        case .floor(let group, let name, let user, let burst, let reason):
            var line: [String: Any] = ["event": "floor", "floor": name, "group": group, "user": user.user]
            if let burst { line["burst"] = BurstID.text(burst) }
            if let reason { line["reason"] = reason.rawValue }
            JSONOutput.print(line)
        case .wake(let group, let burst, let members):
            JSONOutput.print(["event": "wake", "group": group, "burst": BurstID.text(burst), "members": members])
        case .catchUp(let user, let group, let burst, let from, let next):
            JSONOutput.print([
                "event": "catch_up", "user": user.user, "group": group, "burst": BurstID.text(burst),
                "from": Int(from), "next": Int(next),
            ])
        case .refused(let user, let request, let error):
            var line: [String: Any] = [
                "event": "refused", "request": request, "code": error.code.name, "reason": error.message,
            ]
            if let user { line["user"] = user.user }
            JSONOutput.print(line)
        case .fleet(let relays):
            JSONOutput.print(["event": "fleet", "relays": relays])
        case .home(let group, let role, let was, let released):
            JSONOutput.print(["event": "home", "group": group, "role": role, "was": was, "floor_released": released])
        case .trunk(let peer, let state, let reason):
            var line: [String: Any] = ["event": "trunk", "peer": peer, "state": state]
            if let reason { line["reason"] = reason }
            JSONOutput.print(line)
        }
    }
}

/// A burst ID as the JSON lines print it: 16 hex digits.
enum BurstID {
    static func text(_ burst: UInt64) -> String {
        let digits = String(burst, radix: 16)
        return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }
}
