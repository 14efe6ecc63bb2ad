import TransportCore
import TransportIO

/// Event loops shared across a process.
enum SharedLoops {
    /// Every `TransportClient` connection runs here: one thread, started by the first `connect`, alive for the
    /// process. Starting it fails (a `systemCallFailed` error from that `connect`) when the process is out of file
    /// descriptors or threads; the next `connect` tries again.
    static let client = RetryingLazy<EventLoop> { () throws(TransportError) in try EventLoop(name: "ptt-client") }
}
