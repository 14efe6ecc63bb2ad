import TransportCore
import TransportIO

extension TransportServer {
    /// Reloads the certificate chain, the private key, the ticket keys, the token secret and the stateless-reset
    /// secrets from the files `configuration` names (the ones the server was bound with, re-read; `serve` does it
    /// on SIGHUP). New connections use them from then on; connections already open keep their TLS session and carry
    /// on, and the anti-replay store is kept. Connection IDs issued from then on (by open connections too) carry
    /// the new reset secret's tag and tokens; those issued before are still answered with their reset while their
    /// secret is the previous one (``ServerConfiguration/previousStatelessResetSecretFile``). Without a ticket key
    /// file the process's random key stays; without a reset secret file, the process's random reset secret.
    ///
    /// - Throws: what ``bind(configuration:)`` throws for an unreadable certificate, key or secret file; nothing
    ///   has changed then.
    package func reload(configuration: ServerConfiguration) async throws {
        do {
            try await reloadFiles(configuration)
            reloads.withLock { $0.succeeded += 1 }
        } catch {
            reloads.withLock { $0.failed += 1 }
            throw error
        }
    }

    private func reloadFiles(_ configuration: ServerConfiguration) async throws {
        let (loadedTicketKey, previousTicketKey, fleetSecrets) = try configuration.loadSecrets()
        let ticketKey = loadedTicketKey ?? processTicketKey.withLock { $0 }
        let identity = configuration.resolvedRelayIdentity(quicPort: quicAddress?.port ?? 0)
        let relaySecrets = configuration.statelessResetSecretFile == nil ? nil : fleetSecrets.forRelay(identity)
        for (quic, tcp) in zip(quic, tcp) {
            try await quic.loop.submit {
                guard let old = quic.value?.endpoint.tls ?? tcp.value?.tls else { return }
                let tls = try configuration.makeTLSContext(
                    ticketKey: ticketKey, previousTicketKey: previousTicketKey,
                    antiReplayStore: old.zeroRTTAdmission)
                if let endpoint = quic.value?.endpoint {
                    try endpoint.reload(
                        tls: tls,
                        secrets: relaySecrets ?? endpoint.secrets.with(tokenSecret: fleetSecrets.tokenSecret))
                }
                tcp.value?.tls = tls
            }
        }
    }
}
