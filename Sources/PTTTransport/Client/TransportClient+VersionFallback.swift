import TransportCore
import TransportIO

extension TransportClient {
    /// Connects over QUIC. A negotiating client (`configuration.quicVersion` nil) whose saved state starts it in v2
    /// tries once more in v1 when the server answers with Version Negotiation (a relay moved to an ngtcp2 without
    /// v2, or to a v1-only server): the v2 ticket and token are bound to v2 (RFC 9369 §5), so that connection makes a
    /// full handshake, and `resumptionDiagnostic` says why.
    func connectQUIC(
        _ attempt: ConnectAttempt, to remote: SocketAddress, onFirstPacket: @escaping @Sendable () -> Void,
        onUnreachable: @escaping @Sendable () -> Void
    ) async throws -> TransportConnection {
        do {
            return try await connectQUICOnce(
                attempt, to: remote, onFirstPacket: onFirstPacket, onUnreachable: onUnreachable)
        } catch let error as TransportError where ResumedVersion.isVersionNegotiation(error) {
            guard configuration.quicVersion == nil, var saved = attempt.saved, saved.quicVersion == .version2 else {
                throw error
            }
            saved.dropQUICTicket()
            var retry = ConnectAttempt(
                address: attempt.address, identity: attempt.identity, remotes: attempt.remotes, saved: saved,
                diagnostic: "the server answered QUIC v2, the version of the saved ticket, with Version Negotiation: "
                    + "connected in v1 with a full handshake",
                earlyMessages: attempt.earlyMessages, earlyDatagrams: attempt.earlyDatagrams)
            retry.datagramSink = attempt.datagramSink
            return try await connectQUICOnce(
                retry, to: remote, onFirstPacket: onFirstPacket, onUnreachable: onUnreachable)
        }
    }
}

extension ResumptionState {
    /// Forgets the QUIC ticket, token and server parameters (bound to their version), keeping the RTT and the
    /// TCP part.
    mutating func dropQUICTicket() {
        blob.quicTicket = []
        blob.quicToken = []
        blob.quicTransportParameters = []
        blob.quicVersion = ResumptionBlob().quicVersion
    }
}
