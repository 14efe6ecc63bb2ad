import TransportCore
import TransportIO

/// How a connection used saved state, why it did not, and the stream its early messages went on: written on the
/// event loop, read from any thread (the public API reads them once the connection is handed out).
final class ResumptionRecord: Sendable {
    private struct State {
        var status = ResumptionStatus.none
        var diagnostic: String?
        var earlyStream: IncomingStreamHandle?
    }
    private let state = Locked(State())

    /// How this connection used saved state (`.none` until known).
    var status: ResumptionStatus {
        get { state.withLock { $0.status } }
        set { state.withLock { $0.status = newValue } }
    }
    /// Client: why saved state was ignored or only partly used.
    var diagnostic: String? {
        get { state.withLock { $0.diagnostic } }
        set { state.withLock { $0.diagnostic = newValue } }
    }
    /// Client: the stream the early messages went on.
    var earlyStream: IncomingStreamHandle? {
        get { state.withLock { $0.earlyStream } }
        set { state.withLock { $0.earlyStream = newValue } }
    }
}
