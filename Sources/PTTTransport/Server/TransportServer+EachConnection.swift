extension TransportServer {
    /// Runs `handler` for every connection the server accepts, each in a task of its own, until the server shuts
    /// down and every handler has returned.
    ///
    /// Use it instead of adding one child task per connection to a task group: in Swift 6.3's runtime a task that
    /// leaves a group walks past every older child still running, so a relay with thousands of connections pays
    /// for all of them each time one ends; here a connection's end costs the same at any count. Cancelling the
    /// calling task cancels every handler (and stops waiting for new connections).
    ///
    /// ```swift
    /// await server.handleEachConnection { connection in
    ///     for await stream in connection.incomingStreams { ... }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - onConnectionLoop: run each handler on its connection's event loop (`true`), so the relay's work for a
    ///     packet never hops to another thread; keep the default `false` when a handler may block (printing to a
    ///     pipe, a database call), which would stall every connection of that loop.
    ///   - handler: what to do with one connection; it should return when the connection closes.
    public func handleEachConnection(
        onConnectionLoop: Bool = false, _ handler: @escaping @Sendable (TransportConnection) async -> Void
    ) async {
        let tasks = ConnectionTasks()
        await withTaskCancellationHandler {
            for await connection in connections {
                tasks.start(on: onConnectionLoop ? connection.backend.loop : nil) { await handler(connection) }
            }
            await tasks.waitForAll()
        } onCancel: {
            tasks.cancelAll()
        }
    }
}
