import CommandLineSupport
import PTTTransport

/// `--redis-ca PEM`, `--redis-cert PEM` and `--redis-key PEM`: the TLS of every `rediss://` store of `serve`
/// (`--anti-replay` and `--fleet`) — the CAs Redis' certificate must chain to, and the relay's own certificate for a
/// Redis that asks for one (`tls-auth-clients yes`). Each needs a `rediss://` URL; the certificate and the key go
/// together.
enum RedisTLSOptions {
    static let options: Set<String> = ["redis-ca", "redis-cert", "redis-key"]

    /// Refuses the options without a `rediss://` store, and a certificate without its key (or the reverse).
    static func check(_ args: Arguments) throws {
        let tls = [args.value("anti-replay"), args.value("fleet")].contains { $0?.hasPrefix("rediss://") == true }
        for option in ["redis-ca", "redis-cert", "redis-key"] where args.value(option) != nil && !tls {
            throw Arguments.Failure(description: "--\(option) needs a rediss:// --anti-replay or --fleet URL (TLS)")
        }
        if (args.value("redis-cert") == nil) != (args.value("redis-key") == nil) {
            throw Arguments.Failure(
                description: "--redis-cert and --redis-key go together: the certificate and its key")
        }
    }

    /// `store` with the options' trust and client certificate when it speaks TLS.
    static func apply(_ args: Arguments, to store: inout RedisAntiReplayStore) {
        guard store.usesTLS else { return }
        if let ca = args.value("redis-ca") { store.trust = .caFile(ca) }
        store.clientCertificateFile = args.value("redis-cert")
        store.clientKeyFile = args.value("redis-key")
    }
}
