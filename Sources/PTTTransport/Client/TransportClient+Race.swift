import TransportCore
import TransportIO

extension TransportClient {
    /// Happy Eyeballs for QUIC and QMux/TCP: QUIC first; TCP after `delay` unless QUIC heard from the server, at
    /// once on an ICMP error, or from the start when the saved state says TCP worked last time. The first ready
    /// connection wins; the other attempt is cancelled (its socket closed) or, if it also completed, closed.
    /// A certificate, name, ALPN or TLS failure on either path ends the race with that error: an attacker who
    /// can drop UDP cannot push a client onto a weaker path, and a bad certificate never gets a second chance.
    func race(_ attempt: ConnectAttempt, tcpAfter delay: Duration) async throws -> TransportConnection {
        let gate = RaceGate(startTCPNow: attempt.saved?.lastPath == .tcp)
        return try await withThrowingTaskGroup(of: TransportConnection?.self) { group in
            group.addTask {
                try await self.connectQUIC(
                    attempt, onFirstPacket: { gate.quicHeardFromServer() },
                    onUnreachable: { gate.startTCP() })
            }
            group.addTask {
                guard await gate.waitForTCPTurn(delay: delay) else { return nil }
                return try await self.connectTCP(attempt)
            }
            var errors: [TransportError] = []
            var winner: TransportConnection?
            while let result = await group.nextResult() {
                switch result {
                case .success(let connection?):
                    if winner == nil {
                        winner = connection
                        group.cancelAll()
                        gate.startTCP()  // wake a TCP attempt still waiting, so it ends now
                    } else {
                        await connection.close(code: 0, reason: "lost the connection race")
                    }
                case .success(nil):
                    continue
                case .failure(let error):
                    let failure = error as? TransportError ?? TransportError(.internalError, "\(error)")
                    if winner == nil && Self.isFinal(failure) {
                        group.cancelAll()
                        gate.startTCP()
                        throw failure
                    }
                    errors.append(failure)
                    gate.startTCP()  // QUIC failed (ICMP unreachable, refused, timed out): TCP goes now
                }
            }
            if let winner { return winner }
            throw Self.raceFailure(errors)
        }
    }

    /// Failures that prove the server (or an attacker) is not who we want, or speaks the wrong protocol.
    static func isFinal(_ error: TransportError) -> Bool {
        [
            .certificateUntrusted, .certificateNameMismatch, .certificateExpired, .certificateInvalid, .alpnMismatch,
            .tlsFailure, .invalidConfiguration,
        ].contains(error.code)
    }

    /// Both attempts failed: the error of one that reached the server leads (a server that broke QMux over TCP is
    /// the story, not UDP being unreachable), its codes kept; the other's message follows.
    static func raceFailure(_ errors: [TransportError]) -> TransportError {
        let real = errors.filter { $0.code != .cancelled }
        guard let first = real.first else {
            return TransportError(.cancelled, "the connect was cancelled")
        }
        if real.count > 1 {
            var others = real
            let reachedServer = real.firstIndex { $0.code != .unreachable && $0.code != .handshakeTimeout }
            let lead = others.remove(at: reachedServer ?? 0)
            return TransportError(
                lead.code,
                "neither QUIC nor TCP connected: "
                    + ([lead] + others).map(\.message).joined(separator: "; "), libraryCode: lead.libraryCode,
                applicationErrorCode: lead.applicationErrorCode, transportErrorCode: lead.transportErrorCode)
        }
        return first
    }
}

/// When the TCP attempt of a race may start. Thread-safe: QUIC's loop-thread callbacks and the racing tasks use it.
final class RaceGate: Sendable {
    private struct State {
        var startNow: Bool
        var quicProgress = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state: Locked<State>

    init(startTCPNow: Bool) { state = Locked(State(startNow: startTCPNow)) }

    /// QUIC received a packet: the server is there over UDP, TCP need not start after the delay.
    func quicHeardFromServer() { state.withLock { $0.quicProgress = true } }

    /// Start TCP now (ICMP error, QUIC failed, or the race is over).
    func startTCP() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.startNow = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits until TCP should start; false when QUIC made progress within `delay` (TCP is not needed).
    func waitForTCPTurn(delay: Duration) async -> Bool {
        let timer = Task { [self] in
            try? await Task.sleep(for: delay)
            startTCP()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.startNow { return true }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        if Task.isCancelled { return false }
        return state.withLock { !$0.quicProgress }
    }
}
