import TransportCore

/// A server's hook for the streams of a 0-RTT first flight, run on the connection's event loop in the turn the
/// early bytes arrived — before the connection reaches any task — so a relay can act on replay-safe requests
/// (a woken phone's join and catch-up) without a hop: its answer leaves in the same turn, at 0.5-RTT.
///
/// Only connections handed out before their handshake (`EarlyDataPolicy.enabled(deliverBeforeHandshake: true)`)
/// get it, only for bytes that arrived as early data (which the server decrypts only after the ticket's single-use
/// claim succeeded), and only until their handshake completes. The handler, given the connection and the stream,
/// returns who takes its messages (or nil): that closure is offered each message as soon as it is whole, before
/// any reader can see it, and runs under the stream's lock on the loop, so it must not wait or read the stream.
/// What it leaves is read by the connection's tasks as usual.
package final class EarlyStreamTap: Sendable {
    package typealias Handler = @Sendable (TransportConnection, TransportStream) -> ((Message) -> Bool)?
    private let handler = Locked<Handler?>(nil)

    /// Sets (or with nil removes) the handler for connections handed out from now on.
    package func set(_ handler: Handler?) { self.handler.withLock { $0 = handler } }

    /// Loop thread, as the server hands `connection` out: installs the handler on it (nothing when none is set,
    /// or the connection's handshake already completed).
    func install(on connection: TransportConnection) {
        guard let handler = handler.withLock({ $0 }) else { return }
        // The connection holds itself through its driver's handler until the handshake ends or it closes, when
        // the driver drops the handler (so no cycle outlives the handshake).
        connection.backend.installEarlyStreamHandler { handle in
            guard let take = handler(connection, TransportStream(handle: handle, connection: connection)) else {
                return nil
            }
            return EarlyMessageTaker(
                maximumSize: connection.maximumMessageSize, take: take,
                consumed: { connection.backend.consumed(stream: handle.id, bytes: $0) })
        }
    }
}
