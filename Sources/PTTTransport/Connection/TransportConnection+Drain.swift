import TransportCore

extension TransportConnection {
    /// Client: waits until the relay asks this client to move — it is draining for a deploy or a rolling restart
    /// (`TransportServer.drain(deadline:)`) — and returns how long the relay keeps this connection open; returns
    /// nil when the connection closes first. Connect to another relay of the name before then and switch over:
    /// `TransportLink` does so by itself, and its app sees no reconnect. The same over QUIC and TCP.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func relayDraining() async throws(CancellationError) -> Duration? {
        for await notice in relayNotices.subscribe() {
            switch notice {
            case .move(let milliseconds): return .milliseconds(Int64(clamping: milliseconds))
            }
        }
        if Task.isCancelled { throw CancellationError() }
        return nil
    }
}
