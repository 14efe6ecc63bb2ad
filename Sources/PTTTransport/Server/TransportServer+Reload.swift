import TransportCore
import TransportIO

extension TransportServer {
    /// Reloads the certificate chain, the private key, the ticket keys and the token secret from the files
    /// `configuration` names (the ones the server was bound with, re-read; `serve` does it on SIGHUP). New
    /// connections use them from then on; connections already open keep their TLS session and carry on, and the
    /// anti-replay store is kept. The stateless-reset secret is not reloaded (the connection IDs issued carry a
    /// tag derived from it). Without a ticket key file the process's random key stays.
    ///
    /// - Throws: what ``bind(configuration:)`` throws for an unreadable certificate, key or secret file; nothing
    ///   has changed then.
    package func reload(configuration: ServerConfiguration) async throws {
        let (loadedTicketKey, previousTicketKey, fleetSecrets) = try configuration.loadSecrets()
        let ticketKey = loadedTicketKey ?? processTicketKey.withLock { $0 }
        for (quic, tcp) in zip(quic, tcp) {
            try await quic.loop.submit {
                guard let old = quic.value?.endpoint.tls ?? tcp.value?.tls else { return }
                let tls = try configuration.makeTLSContext(
                    ticketKey: ticketKey, previousTicketKey: previousTicketKey,
                    antiReplayStore: old.zeroRTTAdmission)
                quic.value?.endpoint.reload(tls: tls, tokenSecret: fleetSecrets.tokenSecret)
                tcp.value?.tls = tls
            }
        }
    }
}
