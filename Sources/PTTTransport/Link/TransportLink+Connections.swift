extension TransportLink {
    /// Calls `body` once for each connection the link makes, in turn, as each becomes ready, until the link stops or
    /// the calling task is cancelled. `body` should return when its connection closes (a connection it returned
    /// early for is waited out, not handed over again).
    package func forEachConnection(_ body: (TransportConnection) async -> Void) async {
        var previous: TransportConnection?
        while !Task.isCancelled, let connection = try? await nextReady() {
            if connection === previous {
                _ = try? await connection.closed()
                continue
            }
            previous = connection
            await body(connection)
        }
    }
}
