import TransportCore
import TransportIO

extension TransportClient {
    /// The addresses to try for `address`: `configuration.resolve`'s entry for it, else the host itself when it
    /// is numeric, else what the resolver answers (every address, in its order).
    ///
    /// - Throws: `invalidConfiguration` for an override that is not a numeric address, `unreachable` when the
    ///   name does not resolve.
    func addresses(of address: ServerAddress) throws(TransportError) -> [SocketAddress] {
        guard let fixed = configuration.resolve[address] else {
            return try AddressResolver.resolve(host: address.host, port: address.port)
        }
        var remotes: [SocketAddress] = []
        for host in fixed {
            guard let remote = SocketAddress(host: host, port: address.port) else {
                throw TransportError(
                    .invalidConfiguration,
                    "resolve: \(host) is not a numeric IPv4 or IPv6 address (given for \(address))")
            }
            if !remotes.contains(remote) { remotes.append(remote) }
        }
        guard !remotes.isEmpty else {
            throw TransportError(.invalidConfiguration, "resolve: no address given for \(address)")
        }
        return remotes
    }

    /// One transport's attempt at one address: `heard` when the first packet from the server arrives, `refused`
    /// when the address refused at once (ICMP unreachable).
    typealias AddressAttempt =
        @Sendable (
            _ remote: SocketAddress, _ heard: @escaping @Sendable () -> Void, _ refused: @escaping @Sendable () -> Void
        ) async throws -> TransportConnection

    /// Connects to the first of `remotes` to complete a handshake (RFC 8305's connection attempts): the next
    /// address starts when the one before failed, or when it has not heard from the server within
    /// `configuration.addressAttemptDelay`. A certificate, name, ALPN or TLS failure at any address ends it with
    /// that error: an address that presents the wrong certificate is not skipped. `onFirstPacket` fires when any
    /// attempt hears from the server, `onUnreachable` when the last address refused.
    func firstAnswering(
        _ remotes: [SocketAddress], of address: ServerAddress, onFirstPacket: (@Sendable () -> Void)? = nil,
        onUnreachable: (@Sendable () -> Void)? = nil, attempt: @escaping AddressAttempt
    ) async throws -> TransportConnection {
        if remotes.count == 1 {
            return try await attempt(remotes[0], { onFirstPacket?() }, { onUnreachable?() })
        }
        let delay = configuration.addressAttemptDelay
        return try await withThrowingTaskGroup(of: TransportConnection?.self) { group in
            var gates: [AttemptGate] = []
            for (index, remote) in remotes.enumerated() {
                let gate = AttemptGate()
                let before = gates.last
                let isLast = index == remotes.count - 1
                gates.append(gate)
                group.addTask {
                    if let before, await !before.waitForTurn(delay: delay) { return nil }
                    do {
                        return try await attempt(
                            remote,
                            {
                                gate.heardFromServer()
                                onFirstPacket?()
                            },
                            {
                                gate.goNow()
                                if isLast { onUnreachable?() }
                            })
                    } catch {
                        gate.goNow()
                        throw error
                    }
                }
            }
            return try await Self.firstConnection(in: &group, endWaits: { for gate in gates { gate.goNow() } }) {
                errors in
                Self.combinedFailure(errors, "no address of \(address) connected")
            }
        }
    }

    /// The first connection the group's attempts complete. Later winners are closed; a final failure (see
    /// `isFinal`) ends everything with that error; when every attempt failed, `failure` combines their errors.
    /// `endWaits` wakes attempts still waiting for their turn once the group is cancelled.
    static func firstConnection(
        in group: inout ThrowingTaskGroup<TransportConnection?, any Error>, endWaits: () -> Void,
        failure: ([TransportError]) -> TransportError
    ) async throws -> TransportConnection {
        var errors: [TransportError] = []
        var winner: TransportConnection?
        while let result = await group.nextResult() {
            switch result {
            case .success(let connection?):
                if winner == nil {
                    winner = connection
                    group.cancelAll()
                    endWaits()
                } else {
                    await connection.close(code: 0, reason: "lost the connection race")
                }
            case .success(nil):
                continue
            case .failure(let error):
                let failure = error as? TransportError ?? TransportError(.internalError, "\(error)")
                if winner == nil && isFinal(failure) {
                    group.cancelAll()
                    endWaits()
                    throw failure
                }
                errors.append(failure)
            }
        }
        if let winner { return winner }
        throw failure(errors)
    }

    /// Several attempts failed: the error of one that reached the server leads (a server that broke the protocol
    /// is the story, not an address that was unreachable), its codes kept; the others' messages follow `summary`.
    static func combinedFailure(_ errors: [TransportError], _ summary: String) -> TransportError {
        let real = errors.filter { $0.code != .cancelled }
        guard let first = real.first else {
            return TransportError(.cancelled, "the connect was cancelled")
        }
        guard real.count > 1 else { return first }
        var others = real
        let reachedServer = real.firstIndex { $0.code != .unreachable && $0.code != .handshakeTimeout }
        let lead = others.remove(at: reachedServer ?? 0)
        return TransportError(
            lead.code, "\(summary): " + ([lead] + others).map(\.message).joined(separator: "; "),
            libraryCode: lead.libraryCode, applicationErrorCode: lead.applicationErrorCode,
            transportErrorCode: lead.transportErrorCode)
    }
}
