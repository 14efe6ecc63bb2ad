extension TransportServer {
    /// Drains the relay for a deploy or a rolling restart: takes no new connections (QUIC handshakes are refused
    /// with CONNECTION_REFUSED, the TCP listener closes), asks every connected client to move to another relay of
    /// its name (a notice on a stream of the transport's own, over QUIC and TCP alike; a `TransportLink` connects
    /// elsewhere in 0-RTT while this connection still carries audio, then switches), and shuts down once every
    /// client has left or `deadline` has passed, closing what is left with code 0. Returns after the shutdown.
    ///
    /// - Parameter deadline: how long clients have to move; the notice tells them.
    public func drain(deadline: Duration = .seconds(10)) async {
        let end = ContinuousClock.now.advanced(by: deadline)
        // Every 100 ms: a connection whose handshake was not done yet gets its notice once it is.
        while ContinuousClock.now < end {
            let milliseconds = (end - ContinuousClock.now).nanoseconds / 1_000_000
            for (quic, tcp) in zip(quic, tcp) {
                _ = try? await quic.loop.submit {
                    quic.value?.drain(closingIn: milliseconds)
                    tcp.value?.stopAccepting()
                    tcp.value?.askEveryoneToMove(closingIn: milliseconds)
                }
            }
            for _ in 0..<5 where ContinuousClock.now < end {
                if await connectionCount() == 0 { return await shutdown(code: 0) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        await shutdown(code: 0)
    }
}
