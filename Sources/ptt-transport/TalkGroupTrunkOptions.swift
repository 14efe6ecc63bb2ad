import CommandLineSupport
import PTTTalkGroups
import PTTTransport
import TransportCore

/// The trunk options of `serve --talk-groups --fleet`: where trunks are accepted, the secret the relays prove, and
/// how a dialer verifies the relay it reaches.
enum TalkGroupTrunkOptions {
    /// Without --fleet: no trunk option may be given.
    static func refuseStray(_ args: Arguments) throws -> TrunkConfiguration? {
        if let stray = ["trunk-listen", "fleet-secret", "trunk-ca", "trunk-name"].first(where: { args.value($0) != nil }
        ) {
            throw Arguments.Failure(description: "--\(stray) needs --fleet")
        }
        return nil
    }

    /// With --fleet: trunks on --trunk-listen, or else on the relay's own QUIC port (ALPN ptt-trunk/1 beside the
    /// phones'), published as --listen.
    static func trunk(_ args: Arguments) throws -> TrunkConfiguration {
        let certificate = try args.required("cert")
        let listen: String
        let shared: Bool
        if let trunkListen = args.value("trunk-listen") {
            guard ServerAddress(trunkListen) != nil else {
                throw Arguments.Failure(description: "--trunk-listen takes HOST:PORT, not \(trunkListen)")
            }
            (listen, shared) = (trunkListen, false)
        } else {
            guard !args.flag("no-udp"), let relayListen = args.value("listen") else {
                throw Arguments.Failure(description: "--fleet without --trunk-listen runs trunks on --listen (QUIC)")
            }
            (listen, shared) = (relayListen, true)
        }
        var configuration = TrunkConfiguration(
            listen: listen, certificateChain: certificate, privateKey: try args.required("key"),
            trust: trust(args, certificate: certificate, shared: shared), secret: try secret(args))
        configuration.previousSecret = try previousSecret(args)
        configuration.sharesRelayListener = shared
        if shared {  // refused now rather than once bound: a wildcard address is no address to publish
            do {
                _ = try configuration.publishedAddress(bound: ServerAddress(host: "", port: 0))
            } catch {
                throw Arguments.Failure(description: "--fleet: \(error.message)")
            }
        }
        configuration.serverName = try serverName(args, certificate: certificate)
        return configuration
    }

    /// SIGHUP to a relay with trunks: the fleet secret (and the previous one) read again from the files the
    /// options name, replacing the trunks' (those up carry on; the next proofs use them). A file that does not load
    /// is logged as `reload_failed` and the trunks keep what they had.
    static func reloadSecret(_ args: Arguments, into relay: TalkGroupRelay) {
        do {
            let (secret, previous) = (try secret(args), try previousSecret(args))
            try relay.replaceTrunkSecret(secret, previous: previous)
            RelayLog.info("reload", ["trunk_secret": previous == nil ? "current" : "current and previous"])
        } catch {
            RelayLog.error("reload_failed", ["message": "the trunk secret: \(error)"])
        }
    }

    /// --fleet-secret, or else derived from the --ticket-key file (every relay of a fleet shares it for 0-RTT),
    /// or else from the --reset-secret file: replacing that file on every relay replaces the trunk secret.
    private static func secret(_ args: Arguments) throws -> [UInt8] {
        guard
            let (option, path) = ["fleet-secret", "ticket-key", "reset-secret"].lazy.compactMap({ option in
                args.value(option).map { (option, $0) }
            }).first
        else {
            throw Arguments.Failure(
                description:
                    "--fleet needs a secret its relays share for their trunks: --ticket-key FILE (the same file on "
                    + "every relay), --reset-secret FILE or --fleet-secret FILE (32 bytes)")
        }
        do throws(TransportError) {
            return try secret(option, path: path)
        } catch {
            throw Arguments.Failure(description: "--\(option) (the fleet's trunk secret): \(error.message)")
        }
    }

    /// During a rotation of the file the secret is derived from (`--previous-ticket-key`, `--previous-reset-secret`
    /// beside it), the secret derived from the previous file: trunks prove both and admit either, so relays on the
    /// old file and relays on the new one keep their trunks while the files are replaced one relay at a time.
    private static func previousSecret(_ args: Arguments) throws -> [UInt8]? {
        guard args.value("fleet-secret") == nil else { return nil }
        let source = args.value("ticket-key") != nil ? "ticket-key" : "reset-secret"
        guard args.value(source) != nil, let path = args.value("previous-" + source) else { return nil }
        do throws(TransportError) {
            return try TrunkConfiguration.derivedSecret(
                from: SecretFile.load(path: path, length: source == "ticket-key" ? 64 : 32))
        } catch {
            throw Arguments.Failure(
                description: "--previous-\(source) (the fleet's previous trunk secret): \(error.message)")
        }
    }

    /// The secret from `path`, given as `option`: as `bind` does next, a ticket key or reset secret file that does
    /// not exist yet is created (then shared by the relays given it).
    private static func secret(_ option: String, path: String) throws(TransportError) -> [UInt8] {
        switch option {
        case "fleet-secret": return try TrunkConfiguration.loadSecret(path: path)
        case "ticket-key":
            return try TrunkConfiguration.derivedSecret(from: SecretFile.loadOrCreate(path: path, length: 64))
        default: return try TrunkConfiguration.derivedSecret(from: SecretFile.loadOrCreate(path: path, length: 32))
        }
    }

    /// --trunk-ca; else the relay's own --cert file when trunks share its port (the fleet's relays present the
    /// same certificate for the name phones dial), the system's CAs with --trunk-listen.
    private static func trust(_ args: Arguments, certificate: String, shared: Bool) -> TrustRoots {
        if let ca = args.value("trunk-ca") { return .caFile(ca) }
        return shared ? .caFile(certificate) : .system
    }

    /// --trunk-name, else --relay-name, else the first DNS name of the relay's certificate (nil: each peer's host).
    private static func serverName(_ args: Arguments, certificate: String) throws -> String? {
        if let name = args.value("trunk-name") ?? args.value("relay-name") { return name }
        do {
            return try TrunkConfiguration.certificateName(path: certificate)
        } catch {
            throw Arguments.Failure(description: "--cert \(certificate): \(error.message)")
        }
    }
}
