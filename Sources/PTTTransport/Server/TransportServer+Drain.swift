import TransportIO

extension TransportServer {
    /// Drains the relay for a deploy or a rolling restart: takes no new connections (QUIC handshakes are refused
    /// with CONNECTION_REFUSED, the TCP listener closes), asks every connected client to move to another relay of
    /// its name (a notice on a stream of the transport's own, over QUIC and TCP alike; a `TransportLink` connects
    /// elsewhere in 0-RTT while this connection still carries audio, then switches), and shuts down once every
    /// client has left (closed its connection) or `deadline` has passed, closing what is left with code 0.
    /// Returns after the shutdown.
    ///
    /// - Parameter deadline: how long clients have to move; the notice tells them.
    public func drain(deadline: Duration = .seconds(10)) async {
        draining.withLock { $0 = true }
        let end = ContinuousClock.now.advanced(by: deadline)
        let until = MonotonicClock.now() &+ deadline.nanoseconds
        // Asked once: a connection whose handshake was not done yet gets its notice when it is.
        for (quic, tcp) in zip(quic, tcp) {
            _ = try? await quic.loop.submit {
                quic.value?.drain(until: until)
                tcp.value?.stopAccepting()
                tcp.value?.drain(until: until)
            }
        }
        while ContinuousClock.now < end {
            if await openConnectionCount() == 0 { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        await shutdown(code: 0)
    }
}
