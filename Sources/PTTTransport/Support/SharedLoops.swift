import TransportIO

/// Event loops shared across a process.
enum SharedLoops {
    /// Every `TransportClient` connection runs here: one thread, started on first use, alive for the process.
    static let client: EventLoop = {
        do {
            return try EventLoop(name: "ptt-client")
        } catch {
            fatalError("cannot start the client event loop: \(error)")
        }
    }()
}
