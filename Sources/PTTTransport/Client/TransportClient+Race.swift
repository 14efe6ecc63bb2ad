import TransportCore
import TransportIO

extension TransportClient {
    /// Happy Eyeballs for QUIC and QMux/TCP: QUIC first; TCP after `delay` unless QUIC heard from the server (then
    /// when QUIC fails), at once when every address refused QUIC (ICMP errors), or from the start when the saved
    /// state says TCP worked last time. The first ready
    /// connection wins; the other attempt is cancelled (its socket closed) or, if it also completed, closed.
    /// A certificate, name, ALPN or TLS failure on either path ends the race with that error: an attacker who
    /// can drop UDP cannot push a client onto a weaker path, and a bad certificate never gets a second chance.
    func race(_ attempt: ConnectAttempt, tcpAfter delay: Duration) async throws -> TransportConnection {
        let gate = AttemptGate(goNow: attempt.saved?.lastPath == .tcp)
        return try await withThrowingTaskGroup(of: TransportConnection?.self) { group in
            group.addTask {
                do {
                    return try await self.connectQUIC(
                        attempt, onFirstPacket: { gate.heardFromServer() }, onUnreachable: { gate.goNow() })
                } catch {
                    gate.goNow()  // QUIC failed (refused everywhere, timed out): TCP goes now
                    throw error
                }
            }
            group.addTask {
                guard await gate.waitForTurn(delay: delay) else { return nil }
                return try await self.connectTCP(attempt)
            }
            return try await Self.firstConnection(in: &group, endWaits: { gate.goNow() }) { errors in
                Self.combinedFailure(errors, "neither QUIC nor TCP connected")
            }
        }
    }

    /// Failures that prove the server (or an attacker) is not who we want, or speaks the wrong protocol.
    static func isFinal(_ error: TransportError) -> Bool {
        [
            .certificateUntrusted, .certificateNameMismatch, .certificateExpired, .certificateInvalid, .alpnMismatch,
            .tlsFailure, .invalidConfiguration,
        ].contains(error.code)
    }
}
