import TransportCore
import TransportIO

extension TransportClient {
    /// Connects over TCP with QMux over TLS 1.3 (ALPN `<alpn>-qx01`), resuming TLS from the saved TCP ticket; the
    /// replay-safe early messages go as TLS early data when the saved state remembers the server's parameters.
    func connectTCP(_ attempt: ConnectAttempt) async throws -> TransportConnection {
        try await firstAnswering(attempt.remotes, of: attempt.address) { remote, _, _ in
            try await self.connectTCP(attempt, to: remote)
        }
    }

    /// Connects over TCP to one address of the server.
    private func connectTCP(_ attempt: ConnectAttempt, to remote: SocketAddress) async throws -> TransportConnection {
        let ticket = attempt.saved?.blob.tcpTicket
        let (loop, tls) = try loopAndTLS()
        let configuration = self.configuration
        return try await handshake(
            attempt, on: loop, path: .tcp, remote: remote,
            make: {
                if tls.value == nil {
                    tls.value = try configuration.makeTLSContext()
                }
                // On the loop thread: its network namespace.
                let socket = try TCPSocket(connectingTo: remote, fastOpen: configuration.tcpFastOpen)
                // 0-RTT: the replay-safe prefix of the early messages, under the remembered parameters.
                let replaySafe = attempt.earlyMessages.prefix { $0.replaySafe }
                let core = try QMuxOverTLS(
                    client: tls.value!, serverName: configuration.serverName,
                    parameters: configuration.quicParameters, ticket: ticket, now: MonotonicClock.now(),
                    rememberedParameters: attempt.saved?.blob.tcpTransportParameters ?? [],
                    earlyStreamBytes: replaySafe.flatMap { MessageFraming.frame($0.bytes) })
                let driver = QMuxConnectionDriver(
                    loop: loop,
                    pump: TLSStreamPump(loop: loop, core: core, socket: socket, connected: false, limits: .client),
                    outbound: DatagramQueue(capacity: configuration.datagramSendBuffer), remote: remote,
                    datagramReceiveBuffer: configuration.datagramReceiveBuffer)
                return driver
            },
            start: { driver in try driver.start() })
    }
}
