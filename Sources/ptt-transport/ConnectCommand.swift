import CommandLineSupport
import Foundation
import PTTTransport

/// `ptt-transport connect`: a client probe that measures one connection.
enum ConnectCommand {
    static let usage = """
        usage: ptt-transport connect HOST:PORT --ca PEM [--server-name N] [--alpn A] [--message TEXT]
                                     [--datagrams N [--interval MS]] [--session-file FILE] [--transport quic|tcp|auto]
                                     [--json] [--timeout SECONDS]
                                     [--keylog-file FILE] [--qlog-dir DIR] [--keep SECONDS]
                                     [--migrate-after N --migrate-to ADDRESS[:PORT]] [--quic-version 1|2]
                                     [--resolve NAME:PORT:ADDR[,ADDR...]]...
                                     [--user U --group G [--token T] [--push-token T [--push-platform P]]
                                      (--talk N [--priority P] [--emergency] | --listen S) [--catch-up] [--ticket T]]
          --interval sets the milliseconds between the N datagrams (default 1; 20 is a voice call's cadence).
          --timeout bounds the handshake and any silence of the relay during the call (default 10); a call whose
          connection ends before the relay echoed its end (relay gone, closed, reset) exits 1 with one line on stderr.
          --keylog-file appends TLS secrets (NSS key log format, for Wireshark; a secret: debugging only).
          --qlog-dir writes the QUIC connection's qlog into an existing directory.
          --keep stays connected that long through a self-reconnecting link, sending a datagram every 20 ms, and
          reports the fraction echoed, the longest gap between echoes (ms) and the paths used.
          --migrate-after N --migrate-to ADDRESS moves the QUIC connection to that local address after N datagrams
          (no new handshake) and adds the local paths used and whether it moved to the JSON.
          Without --quic-version the QUIC connection starts in v1 (or the session file's version), offers v1 and v2
          and moves to v2 when the relay prefers it (RFC 9368; ngtcp2 1.x, see --version). --quic-version 1|2 speaks
          only that version (2: RFC 9369, needs ngtcp2 1.x). The JSON's quic_version says which version it spoke.
          --resolve uses those addresses for NAME:PORT instead of the resolver (curl's convention; repeatable). The
          addresses are tried in order, the next one when the one before refused or stayed silent for 250 ms; the
          session file belongs to NAME:PORT (the certificate's name), so it wakes into any of them.
        \(TalkGroupConnect.usage)
        """

    static func run(_ raw: [String]) async throws {
        let args = try Arguments(
            raw,
            options: ([
                "ca", "server-name", "alpn", "message", "datagrams", "interval", "session-file", "transport", "timeout",
                "keep",
                "keylog-file",
                "qlog-dir",
                "migrate-after", "migrate-to", "quic-version", "resolve",
            ] as Set<String>).union(TalkGroupConnect.options),
            flags: Set(["json", "debug"]).union(TalkGroupConnect.flags))
        guard args.positionals.count == 1, let address = ServerAddress(args.positionals[0]) else {
            throw Arguments.Failure(description: "expected one HOST:PORT argument")
        }
        let fallback: FallbackPolicy
        switch args.value("transport") ?? "auto" {
        case "quic": fallback = .quicOnly
        case "tcp": fallback = .tcpOnly
        case "auto": fallback = .race()
        case let other: throw Arguments.Failure(description: "--transport \(other): use quic, tcp or auto")
        }
        let datagramCount = try args.integer("datagrams", default: 0)
        let interval = try args.integer("interval", default: 1)
        guard (1...1_000).contains(interval) else {
            throw Arguments.Failure(description: "--interval is 1 to 1000 milliseconds between datagrams")
        }
        let migration = try MigrationPlan(args, datagrams: datagramCount)
        let message = Array((args.value("message") ?? "hello").utf8)
        let timeout = try args.number("timeout") ?? 10
        var configuration = ClientConfiguration(
            serverName: args.value("server-name") ?? address.host, trust: .caFile(try args.required("ca")))
        if let alpn = args.value("alpn") { configuration.alpn = alpn }
        configuration.fallback = fallback
        configuration.debugLogging = args.flag("debug")
        configuration.handshakeTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.keyLogFile = args.value("keylog-file")
        configuration.qlogDirectory = args.value("qlog-dir")
        configuration.resolve = try ResolveOption.parse(args.values("resolve"))
        switch args.value("quic-version") {
        case nil: configuration.quicVersion = nil  // negotiate
        case "1": configuration.quicVersion = .version1
        case "2": configuration.quicVersion = .version2
        case let other?: throw Arguments.Failure(description: "--quic-version \(other): use 1 or 2")
        }

        let sessionFile = args.value("session-file")
        if args.value("user") != nil {
            try await TalkGroupConnect.run(
                args, address: address, configuration: configuration, sessionFile: sessionFile, timeout: timeout)
            return
        }
        if let stray = TalkGroupConnect.options.union(TalkGroupConnect.flags).first(where: {
            args.value($0) != nil || args.flag($0)
        }) {
            throw Arguments.Failure(description: "--\(stray) is an option of the talk-group phone (--user U --group G)")
        }
        if let keep = try args.number("keep") {
            try await ConnectKeep.run(
                address: address, configuration: configuration, message: message, sessionFile: sessionFile,
                seconds: keep, json: args.flag("json"))
            return
        }
        let saved = sessionFile.flatMap(SessionFile.load)
        // A relay that dies mid-call is noticed within the timeout: the connection closes with idleTimeout after
        // that much silence, and keep-alives hold a quiet but live call open.
        configuration.idleTimeout = .milliseconds(Int64(max(timeout, 1) * 1000))
        configuration.keepAliveInterval = .milliseconds(Int64(max(timeout, 1) * 500))

        let clock = ContinuousClock()
        let start = clock.now
        let connection = try await TransportClient(configuration: configuration).connect(
            to: address, resuming: saved, earlyMessages: [EarlyMessage(message, replaySafe: true)])
        let handshake = clock.now - start
        if let diagnostic = connection.resumptionDiagnostic {
            FileHandle.standardError.write(Data("ptt-transport: \(diagnostic)\n".utf8))
        }
        guard let stream = connection.earlyStream else {
            throw Arguments.Failure(description: "the message stream could not be opened")
        }
        let echo: Message?
        do {
            echo = try await stream.nextMessage()
        } catch {
            // The relay died before it echoed the message (a restart can reset the call this early too).
            throw CallEnd.died(error, connection: connection, echoed: nil, of: 0)
        }
        guard let echo, echo.bytes == message else {
            throw Arguments.Failure(description: "the server did not echo the message")
        }
        let firstResponse = clock.now - start
        let pathsBefore = await connection.statistics().localAddress
        let migrating = migration.map { plan in Task { try await plan.run(on: connection) } }
        var echoedSoFar: Int?
        do {
            echoedSoFar = try await exchangeDatagrams(connection, count: datagramCount, interval: interval)
            try await CallEnd.confirm(stream)
        } catch {
            migrating?.cancel()
            throw CallEnd.died(error, connection: connection, echoed: echoedSoFar, of: datagramCount)
        }
        let echoed = echoedSoFar ?? 0
        let migrated = await migrating?.result
        let paths = [pathsBefore] + ((try? migrated?.get()).map { [$0] } ?? [])
        if let sessionFile {
            // The ticket follows the handshake by about one round trip: wait for it (at most 2 s), then save.
            if let state = await connection.firstResumptionState(within: .seconds(2)) {
                try state.save(to: sessionFile)
            }
        }
        let quicVersion = await connection.statistics().quicVersion
        await connection.close()

        let (resumed, earlyData): (Bool, String) =
            switch connection.resumption {
            case .none: (false, "none")
            case .resumed(let early): (true, early == .notAttempted ? "none" : early.rawValue)
            }
        if case .failure(let error)? = migrated {
            FileHandle.standardError.write(Data("ptt-transport: the migration failed: \(error)\n".utf8))
        }
        var result: [String: Any] = [
            "path": connection.path.rawValue, "resumed": resumed, "early_data": earlyData,
            "handshake_ms": rounded(milliseconds(handshake)), "first_response_ms": rounded(milliseconds(firstResponse)),
            "datagrams_sent": datagramCount, "datagrams_echoed": echoed,
        ]
        if let quicVersion { result["quic_version"] = Int(quicVersion.description) }
        if migration != nil {
            result["paths"] = paths.filter { !$0.isEmpty }
            result["migrated"] = paths.count > 1
        }
        if args.flag("json") {
            JSONOutput.print(result)
        } else {
            print(
                "connected over \(connection.path.rawValue) to \(connection.remoteAddress): handshake "
                    + "\(rounded(milliseconds(handshake))) ms, first response \(rounded(milliseconds(firstResponse))) ms, "
                    + "\(echoed)/\(datagramCount) datagrams echoed")
        }
    }

    /// Sends `count` numbered datagrams 1 ms apart and counts distinct echoes until all arrived or 1 s of quiet.
    static func exchangeDatagrams(_ connection: TransportConnection, count: Int, interval: Int) async throws -> Int {
        guard count > 0 else { return 0 }
        return try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                var seen = Set<UInt32>()
                for await datagram in connection.datagrams where datagram.payload.count >= 4 {
                    let index = datagram.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                    seen.insert(index)
                    if seen.count == count { break }
                }
                return seen.count
            }
            group.addTask {
                for index in 0..<count {
                    let value = UInt32(index)
                    var payload = [
                        UInt8(value >> 24), UInt8((value >> 16) & 0xff), UInt8((value >> 8) & 0xff),
                        UInt8(value & 0xff),
                    ]
                    payload += [UInt8](repeating: 0x55, count: 76)
                    try connection.sendDatagram(payload, expiresAfter: .milliseconds(100))
                    try await Task.sleep(for: .milliseconds(interval))
                }
                try await Task.sleep(for: .seconds(1))
                return nil
            }
            var echoed = 0
            while let next = try await group.next() {
                if let next {
                    echoed = next
                    break
                }
                // The sender finished and the grace period passed: count what arrived.
                group.cancelAll()
            }
            group.cancelAll()
            return echoed
        }
    }
}
